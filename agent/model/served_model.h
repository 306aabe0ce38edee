// One model as the agent serves it: its signature, batching scheduler, dispatcher and the
// runtime instances of its static ⟨count, threads, batch⟩ plan.
//
// States: kLoading (instances starting) -> kReady, or -> kFailed (with a reason) when any
// instance could not start; -> kStopped after Stop(). Only kReady accepts requests.
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/batching/batch_scheduler.h"
#include "agent/batching/dispatcher.h"
#include "agent/config/config.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/planning/optimizer.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/runtime_instance.h"

namespace packrat {

enum class ModelState { kLoading, kReady, kFailed, kStopped };

// Gives each instance (by its thread count, in plan order) the cores it is pinned to.
using CoreAssignFn = std::function<std::vector<std::vector<int>>(const std::vector<int>& threads)>;

struct ServedModelOptions {
  std::string runtime_path;
  std::string profile_dir;    // where `instances: auto` profiles are kept
  std::vector<int> cores;     // usable cores; T for auto plans unless auto_threads is set
  CoreAssignFn assign_cores;  // may be empty: no pinning
  metrics::ModelMetrics* metrics = nullptr;  // not owned; may be null (no metrics)
};

class ServedModel {
 public:
  // `launcher` is not owned.
  ServedModel(ModelConfig config, ServedModelOptions options, ProcessLauncher* launcher);
  ~ServedModel();  // Stop()s

  // Starts every instance (blocking, minutes for big models) and then serves. With
  // `instances: auto` it first loads the stored profile or measures one (much longer) and
  // solves the optimizer's plan. On failure the model is kFailed, the reason is kept, and
  // instances already started are stopped.
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
  // The plan being served (set once loaded): the config's groups, or the optimizer's with
  // its predicted latency for `instances: auto`.
  std::vector<InstanceGroup> groups() const;
  std::optional<Plan> optimizer_plan() const;
  // This model's metric series, or null. Valid for the model's lifetime.
  metrics::ModelMetrics* metrics() const { return options_.metrics; }

 private:
  // Resolves the groups to serve: the config's, or the optimizer's for `instances: auto`.
  StatusOr<std::vector<InstanceGroup>> ResolvePlan();
  // Publishes the instance groups under `state` ("ready", "stopped", ...) in the metrics.
  void PublishInstances(const std::vector<InstanceGroup>& groups, const std::string& state);
  // Metrics hooks for the dispatcher (queue time, batch latency).
  DispatchObserver MakeDispatchObserver();

  const ModelConfig config_;
  const ModelSignature signature_;
  const ServedModelOptions options_;
  ProcessLauncher* const launcher_;

  std::atomic<ModelState> state_{ModelState::kLoading};
  mutable std::mutex mu_;
  std::string failure_;                                      // guarded by mu_
  std::vector<InstanceGroup> groups_;                        // guarded by mu_
  std::optional<Plan> plan_;                                 // guarded by mu_
  std::vector<std::unique_ptr<RuntimeInstance>> instances_;  // set once by Load()
  std::unique_ptr<Dispatcher> dispatcher_;                   // set once by Load()
  std::unique_ptr<BatchScheduler> scheduler_;                // set once by Load()
  metrics::CallbackHandle queue_rows_metric_;                // set once by Load()
  std::atomic<double> measured_batch_seconds_{0};            // EWMA of batch latency
};

}  // namespace packrat
