// One model as the agent serves it: its signature, the batching scheduler, and the instance
// sets (runtimes + dispatcher) of the plan it serves now, which can change while it serves.
//
// States: kLoading (instances starting) -> kReady, or -> kFailed (with a reason) when any
// instance could not start; -> kStopped after Stop(). Only kReady accepts requests.
//
// ServedModel is the facade that wires the parts, each in its own file pair:
//   - InstanceSets (instance_sets.h): the active, draining and parked runtimes and the
//     mechanics of switching between plans without downtime; WorkerStarter starts runtimes;
//   - ModelController (model_controller.h): the control thread that runs every change in order
//     — management API plan changes, the Autoscaler's moves (agent/planning/autoscaler.h: the
//     policy, a pure unit), replacements of dead runtimes;
//   - LayeredBatching (layered_batching.h): the top-up policies of `batching.mode: layered`.
// A dead runtime's slices are retried once on a live instance, else answered 503; then a
// replacement is started. No request fails or is answered twice because of a reconfiguration.
//
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/batching/batch_scheduler.h"
#include "agent/config/config.h"
#include "agent/kserve/generate_codec.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/model/instance_sets.h"
#include "agent/model/layered_batching.h"
#include "agent/model/model_controller.h"
#include "agent/model/model_profile.h"
#include "agent/model/profiling_progress.h"
#include "agent/model/serving_snapshot.h"
#include "agent/model/worker_starter.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/slowdown_tracker.h"
#include "agent/pool/cpuset_controller.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/revision.h"

namespace packrat {

enum class ModelState { kLoading, kReady, kFailed, kStopped };

// "LOADING", "READY", "FAILED" or "STOPPED": the state as model metadata reports it (REST and
// gRPC alike).
std::string_view ModelStateName(ModelState state);

struct ServedModelOptions {
  std::string runtime_path;
  std::string profile_dir;                   // where `instances: auto` profiles are kept
  ResourceAllocator* allocator = nullptr;    // not owned; null: no pinning, no thread budget
  CpusetController* cpusets = nullptr;       // not owned; null: no cgroups
  metrics::ModelMetrics* metrics = nullptr;  // not owned; null: no metrics
  int runtime_idle_spin_us = 100;            // server.runtime_idle_spin_us
  Clock* clock = Clock::Real();              // not owned: the control loop's time
  // Called after every change a Snapshot() shows (revision); any thread; must not block.
  std::function<void()> on_change;
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

  // Generative models: starts a sequence on the least-loaded decode instance and sets *cancel
  // to a function that ends it early (callable from any thread, any number of times).
  // kFailedPrecondition unless ready and generative.
  Status Generate(std::shared_ptr<GenerateRequest> request, std::function<void()>* cancel);
  bool generative() const { return config_.generation.enabled; }
  // What a generate request may hold: the model's vocabulary and prompt limit (as its runtimes
  // reported them) and the configured token limits.
  GenerateLimits generate_limits() const;
  // Stops accepting, lets queued and in-flight requests finish (up to `drain`), stops the
  // runtimes and removes their segments and cgroups. Waits for a reconfiguration in progress.
  void Stop(std::chrono::milliseconds drain);
  // Marks the model as going away for good (the model repository's unload, before Stop()):
  // front ends answer new requests with "not ready: being unloaded" instead of retrying.
  void set_unloading() { unloading_.store(true, std::memory_order_release); }
  bool unloading() const { return unloading_.load(std::memory_order_acquire); }

  // Validates `change` at once (InvalidArgument for an infeasible plan, FailedPrecondition
  // unless ready) and otherwise queues it on the control thread; `done` runs there once the
  // new set serves, or with the reason it could not start. Never blocks.
  void ChangePlan(PlanChange change, std::function<void(Status)> done);

  const std::string& name() const { return config_.name; }
  const ModelConfig& config() const { return config_; }
  const ModelSignature& signature() const { return signature_; }
  ModelState state() const { return state_.load(std::memory_order_acquire); }
  std::string failure() const;
  // What a loading model is doing ("profiling 37/112 points, ETA 4m10s", "starting runtimes"),
  // or why it failed; "" once ready.
  std::string status_detail() const;
  // Process ids of every running instance: serving, draining and parked.
  std::vector<pid_t> instance_pids() const;
  // The plan being served (empty before loading).
  std::vector<InstanceGroup> groups() const;
  std::optional<Plan> optimizer_plan() const;
  ServingSnapshot Snapshot() const;
  // Counts the changes Snapshot() shows (ServingSnapshot::revision), cheaply.
  uint64_t revision() const { return revision_.current(); }
  // The load report of the serving set's first runtime (kernel settings in effect and the
  // accuracy guard's figures, "key=value ..."); empty before loading.
  std::string load_report() const;
  // Layered batching per thread count of the plan (empty unless batching.mode is layered).
  std::vector<LayeredInfo> layered_info() const {
    return layered_ ? layered_->Info() : std::vector<LayeredInfo>();
  }
  // This model's metric series, or null. Valid for the model's lifetime.
  metrics::ModelMetrics* metrics() const { return options_.metrics; }

  // The node partition (node_controller.h). Whether the model takes part: `instances: auto`
  // without `auto_threads`, batched (not layered, not generative).
  bool PartitionCandidate() const;
  // Its profile once ready (null before, or without one). Valid for the model's lifetime.
  const Optimizer* optimizer() const {
    return state() == ModelState::kReady ? optimizer_.get() : nullptr;
  }
  // What its control loop measures (ModelController::Snapshot: the arrival rate, whether it is
  // measured yet, its step, its recent peak); nullopt until the model is ready.
  std::optional<ControllerSnapshot> controller_snapshot() const;
  // Rows queued beyond two batches of the serving set (one running, one cut): a queue that
  // grows because the plan cannot keep up shows here at once, in its rate only over a second.
  // 0 for a decoder.
  int64_t backlog_rows() const;
  // How much slower than the profile its runtimes of `threads` threads serve (measured).
  double Slowdown(int threads) const { return slowdowns_.Get(threads); }
  // The CPUs of each live runtime of the serving set, in set order (empty without placement).
  std::vector<std::vector<int>> ServingCpus() const;
  // Whether a shrink to `cpus` (a subset of its share) would keep serving on its runtimes inside
  // them, within ModelController::kResizeMargin of `plan`'s p99 at `rate` rows/s (0: unknown)
  // — Autoscaler::KeepingPlan — rather than start a new set beside its busy runtimes. True
  // where its runtimes are not resizable (every resize restarts those) and where nothing is in
  // the system (a start beside idle runtimes costs no request anything). Any thread.
  bool ShrinkKeeps(const std::vector<int>& cpus, const Plan& plan, double rate) const;
  // Queues `request` on the control thread (ModelController::Resize); `done` runs there with
  // the outcome. Never blocks. FailedPrecondition unless ready.
  void Resize(ResizeRequest request, std::function<void(Status)> done);

 private:
  // Resolves the groups to serve: the config's, or the optimizer's for `instances: auto`
  // (loading or measuring the profile first).
  StatusOr<std::vector<InstanceGroup>> ResolvePlan(std::optional<Plan>* plan);
  // SetHooks of sets_: builds a set (dispatcher, B, backlog batch) and points the scheduler at
  // a new one.
  std::shared_ptr<InstanceSet> MakeSet(uint64_t generation, std::vector<InstanceGroup> groups,
                                       std::optional<Plan> plan,
                                       std::vector<std::shared_ptr<Worker>> workers,
                                       std::vector<int64_t> batches);
  void Switched(const InstanceSet& next);
  // Load's parts: the model's controller and its policy (controller_), before the first set
  // starts; and a failed load's record (state kFailed, failure_, the instances metric), which
  // returns `status`.
  void MakeController();
  Status LoadFailed(const Status& status, const std::vector<InstanceGroup>& groups) EXCLUDES(mu_);
  Status ValidatePlan(const std::vector<InstanceGroup>& groups) const;
  // T: the thread budget for plans (auto_threads, capped by the usable cores or the share).
  int ThreadBudget() const { return ThreadBudgetFor(config_, options_.allocator); }
  // Whether runtimes start with room for batching.max_batch (slices of any size up to it, or
  // as many decode slots): `instances: auto` models with a max_batch, batched (not layered) or
  // generative. Then a plan change that keeps a thread count at another b keeps its runtimes
  // (only the plan's split changes), and parked runtimes serve any b of their thread count.
  bool ResizableRuntimes() const;
  // reconfiguration.parked_runtimes resolved (auto: the thread budget, or the machine's
  // hardware threads without an allocator).
  size_t ParkLimit() const { return ParkLimitFor(config_, options_.allocator); }
  // Rows (a decoder's sequences) queued or running and not answered: the estimator's load.
  int64_t RowsInSystem() const;
  // One batch a runtime computed (a slice, or a decode step of `timing.rows` sequences): into
  // the batch-size and compute histograms and the statistics and, after the runtime's first
  // kColdSlices batches of each size (which may run cold: a size it was not warmed up at), its
  // compute's ratio to the profile's prediction for `threads` and its rows into slowdowns_
  // (the profile timed one instance alone). `seen` counts the runtime's batches per size.
  void ObserveComputed(int threads, const SliceTiming& timing, std::map<int64_t, int>* seen);

  const ModelConfig config_;
  const ModelSignature signature_;
  uint64_t smallest_input_slab_ = 0;  // CheckRowFits' bound; 0: every row fits (set once)
  const ServedModelOptions options_;
  ProcessLauncher* const launcher_;

  void SetState(ModelState state);

  Revision revision_;  // counts the changes Snapshot() shows (before sets_ and controller_)
  std::atomic<ModelState> state_{ModelState::kLoading};
  std::atomic<bool> unloading_{false};
  mutable Mutex mu_;
  std::string failure_ GUARDED_BY(mu_);
  std::shared_ptr<ProfilingProgress> profiling_ GUARDED_BY(mu_);  // instances: auto

  // How much slower than the profile each thread count serves (fed by the runtimes'
  // completion threads; a switch of sets is bracketed by InstanceSets).
  SlowdownTracker slowdowns_;
  static constexpr int kColdSlices = 2;  // each runtime's first slices of a size are left out

  // The optimizer over the model's profile (`instances: auto` only); set once by Load before
  // any runtime starts.
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LayeredBatching> layered_;  // batching.mode: layered only
  WorkerStarter starter_;
  InstanceSets sets_;
  std::unique_ptr<ModelController> controller_;  // set once by Load before any runtime starts
  std::unique_ptr<BatchScheduler> scheduler_;    // set once by Load (batch models)
  metrics::CallbackHandle queue_rows_metric_;    // set once by Load()
  metrics::CallbackHandle runtimes_metric_;      // set once by Load()

  // Rows accepted by Submit, ever; for a generative model, decode steps asked for by Generate.
  std::atomic<int64_t> rows_arrived_{0};
  // Rows accepted by Submit and not answered yet: the estimator's load. Shared with each
  // request's rows-finished observer (it counts rows out before their client is answered).
  std::shared_ptr<std::atomic<int64_t>> rows_in_system_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace packrat
