// One model as the agent serves it: its signature, batching scheduler, dispatcher and the
// runtime instances of its static ⟨count, threads, batch⟩ plan.
//
// States: kLoading (instances starting) -> kReady, or -> kFailed (with a reason) when any
// instance could not start; -> kStopped after Stop(). Only kReady accepts requests.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/batching/batch_scheduler.h"
#include "agent/batching/dispatcher.h"
#include "agent/config/config.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/runtime_instance.h"

namespace packrat {

enum class ModelState { kLoading, kReady, kFailed, kStopped };

class ServedModel {
 public:
  // `launcher` is not owned. `cores` are the cores each instance is pinned to, one list per
  // instance in plan order (empty lists = no pinning).
  ServedModel(ModelConfig config, std::string runtime_path, ProcessLauncher* launcher,
              std::vector<std::vector<int>> cores);
  ~ServedModel();  // Stop()s

  // Starts every instance (blocking, minutes for big models) and then serves. On failure the
  // model is kFailed, the reason is kept, and instances already started are stopped.
  Status Load();
  // Queues a validated request. kFailedPrecondition unless ready; kResourceExhausted when the
  // queue is full.
  Status Submit(std::shared_ptr<InferenceRequest> request);
  // Stops accepting, lets queued and in-flight requests finish (up to `drain`), stops the
  // runtimes and removes their segments.
  void Stop(std::chrono::milliseconds drain);

  const std::string& name() const { return config_.name; }
  const ModelConfig& config() const { return config_; }
  const ModelSignature& signature() const { return signature_; }
  ModelState state() const { return state_.load(std::memory_order_acquire); }
  std::string failure() const;
  // Process ids of the running instances (tests and /metrics).
  std::vector<pid_t> instance_pids() const;

 private:
  const ModelConfig config_;
  const ModelSignature signature_;
  const std::string runtime_path_;
  ProcessLauncher* const launcher_;
  const std::vector<std::vector<int>> cores_;

  std::atomic<ModelState> state_{ModelState::kLoading};
  mutable std::mutex mu_;
  std::string failure_;                                      // guarded by mu_
  std::vector<std::unique_ptr<RuntimeInstance>> instances_;  // set once by Load()
  std::unique_ptr<Dispatcher> dispatcher_;                   // set once by Load()
  std::unique_ptr<BatchScheduler> scheduler_;                // set once by Load()
  std::atomic<int64_t> inflight_requests_{0};
};

}  // namespace packrat
