// One model as the agent serves it: its signature, the batching scheduler, and the instance
// set (runtimes + dispatcher) of the plan it serves now, which can change while it serves.
//
// States: kLoading (instances starting) -> kReady, or -> kFailed (with a reason) when any
// instance could not start; -> kStopped after Stop(). Only kReady accepts requests.
//
// Reconfiguration (packrat-paper §3.7). A new plan is served by a new instance set, generation
// N+1. Instances whose ⟨threads, batch⟩ also appear in the new plan are kept (adding or removing
// instances of one shape touches only those), and so are, for `instances: auto` models, those
// whose thread count appears at another batch size (their slabs hold batching.max_batch rows,
// a decoder's cache as many sequences: SliceCapacity); the rest of the new set — for a change of
// thread counts, all of it — is started as a shadow set beside the serving one, on its own cores
// where free ones exist, else overlapping. Only when every shadow runtime has warmed up does the
// scheduler switch to the new dispatcher; the old set then finishes its running batches, and
// its instances that are not kept stop and leave their cgroups — or are parked
// (reconfiguration.parked_runtimes): kept idle and warm, off the dispatcher, holding no
// CPU lease, until a later set takes them instead of starting runtimes of their shape (the
// most recently parked first, on CPUs no other instance of that set has) or the limit evicts
// the oldest. A failed start leaves the old set serving (its parked runtimes stay parked). No
// request fails or is answered twice because of a reconfiguration.
//
// Who reconfigures: one control thread per model runs every reconfiguration in order — plan
// changes from the management API (ChangePlan), the batch-size estimator's decisions and the
// overload fast path (both sampled on the same thread; only `instances: auto` models with
// `reconfiguration.adaptive` act on them; docs/architecture.md) and restarts of runtimes that
// died (a dead runtime's slices are retried once on a live instance, else answered 503; then a
// replacement is started).
//
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/batching/batch_scheduler.h"
#include "agent/batching/batching_simulator.h"
#include "agent/batching/top_up_policy.h"
#include "agent/config/config.h"
#include "agent/kserve/generate_codec.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/model/instance_set.h"
#include "agent/planning/arrival_rate.h"
#include "agent/planning/batch_size_estimator.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/slowdown_tracker.h"
#include "agent/pool/cpuset_controller.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"

namespace packrat {

enum class ModelState { kLoading, kReady, kFailed, kStopped };

struct ServedModelOptions {
  std::string runtime_path;
  std::string profile_dir;                   // where `instances: auto` profiles are kept
  ResourceAllocator* allocator = nullptr;    // not owned; null: no pinning, no thread budget
  CpusetController* cpusets = nullptr;       // not owned; null: no cgroups
  metrics::ModelMetrics* metrics = nullptr;  // not owned; null: no metrics
  int runtime_idle_spin_us = 100;            // server.runtime_idle_spin_us
};

// A plan change asked for through the management API. Exactly one of `instances` (an explicit
// plan) or `batch` (the optimizer's plan for that B) may be set; `adaptive` alone turns the
// estimator's automatic reconfiguration on or off. An explicit plan or batch turns it off
// unless `adaptive` says otherwise.
struct PlanChange {
  std::optional<std::vector<InstanceGroup>> instances;
  std::optional<int64_t> batch;
  std::optional<bool> adaptive;
};

struct WorkerInfo {
  pid_t pid = 0;
  std::vector<int> cpus;
  int threads = 0;
  int64_t batch = 0;
  uint64_t generation = 0;
  bool draining = false;  // in an old set that is finishing its batches
  bool alive = false;
};

// Layered batching as derived for one thread count (stage_profile.h).
struct LayeredInfo {
  int threads = 0;
  int stages = 0;
  int64_t profiled_batch = 0;   // N
  double budget_ms = 0;         // t_opt
  double strict_budget_ms = 0;  // t_OPT
  double max_fluctuation = 0;   // r_max
  int64_t optimal_batch = 0;    // N_opt
  StageProfile::Fit fit;        // g(b)
};

struct ServingSnapshot {
  uint64_t generation = 0;
  int64_t batch = 0;          // B of the serving set
  int64_t backlog_batch = 0;  // the most rows of a batch cut from a backlog (>= batch)
  std::vector<InstanceGroup> groups;
  std::optional<Plan> plan;
  std::vector<WorkerInfo> workers;  // serving set first, then draining ones
  std::vector<WorkerInfo> parked;   // idle runtimes of earlier sets, oldest first
  double ewma = 0;                  // the estimator's moving average of the load
  int64_t estimate = 0;             // its power-of-two estimate
  bool adaptive = false;            // whether its decisions reconfigure
  int thread_budget = 0;            // T; 0 = unknown (no allocator)
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

  // Validates `change` at once (InvalidArgument for an infeasible plan, FailedPrecondition
  // unless ready) and otherwise queues it on the control thread; `done` runs there once the
  // new set serves, or with the reason it could not start. Never blocks.
  void ChangePlan(PlanChange change, std::function<void(Status)> done);

  const std::string& name() const { return config_.name; }
  const ModelConfig& config() const { return config_; }
  const ModelSignature& signature() const { return signature_; }
  ModelState state() const { return state_.load(std::memory_order_acquire); }
  std::string failure() const;
  // Process ids of every running instance: serving, draining and parked.
  std::vector<pid_t> instance_pids() const;
  // The plan being served (empty before loading).
  std::vector<InstanceGroup> groups() const;
  std::optional<Plan> optimizer_plan() const;
  ServingSnapshot Snapshot() const;
  // The load report of the serving set's first runtime (kernel settings in effect and the
  // accuracy guard's figures, "key=value ..."); empty before loading.
  std::string load_report() const;
  // Layered batching per thread count of the plan (empty unless batching.mode is layered).
  std::vector<LayeredInfo> layered_info() const;
  // This model's metric series, or null. Valid for the model's lifetime.
  metrics::ModelMetrics* metrics() const { return options_.metrics; }

 private:
  // Resolves the groups to serve: the config's, or the optimizer's for `instances: auto`.
  StatusOr<std::vector<InstanceGroup>> ResolvePlan(std::optional<Plan>* plan);
  // Starts runtimes for `threads`/`batches` (pairwise) in parallel on placements that avoid
  // `exclude`, for generation `generation`. All or nothing.
  StatusOr<std::vector<std::shared_ptr<Worker>>> StartWorkers(
      const std::vector<std::pair<int, int64_t>>& shapes, const std::vector<int>& exclude,
      uint64_t generation);
  // Generative models: starts the decode runtimes of `workers` (placed, with cgroups).
  StatusOr<std::vector<std::shared_ptr<Worker>>> StartDecoders(
      std::vector<std::shared_ptr<Worker>> workers, uint64_t generation);
  // `batches`: each worker's b in this plan (empty: the b each was started for).
  std::shared_ptr<InstanceSet> MakeSet(uint64_t generation, std::vector<InstanceGroup> groups,
                                       std::optional<Plan> plan,
                                       std::vector<std::shared_ptr<Worker>> workers,
                                       std::vector<int64_t> batches);
  // Control thread only. Serves `groups` as the next generation (see the class comment).
  // `restart`: replacing dead runtimes, not a plan change.
  Status Reconfigure(std::vector<InstanceGroup> groups, std::optional<Plan> plan,
                     const std::string& reason, bool restart);
  Status ApplyChange(const PlanChange& change);
  // Layered batching: loads or measures the stage profile of every thread count in `groups`
  // that has none yet, and derives its top-up policy. Blocking (measurements).
  Status PrepareLayered(const std::vector<InstanceGroup>& groups);
  // Answers a runtime's top-up query (on its completion thread): whole requests from the
  // queue's front while the policy admits them.
  TopUpGrant TopUp(const TopUpPolicy& policy, const TopUpQuery& query);
  // B for a set of `groups`: Σ count·batch, or for layered batching the smallest N_opt.
  int64_t BatchTarget(const std::vector<InstanceGroup>& groups) const;
  Status ValidatePlan(const std::vector<InstanceGroup>& groups) const;
  int ThreadBudget() const;
  // Whether runtimes start with room for batching.max_batch (slices of any size up to it, or
  // as many decode slots): `instances: auto` models with a max_batch, batched (not layered) or
  // generative. Then a plan change that keeps a thread count at another b keeps its runtimes
  // (only the plan's split changes), and parked runtimes serve any b of their thread count.
  bool ResizableRuntimes() const;
  // ResizableRuntimes() of a batch model: batches cut from a backlog may take more than B
  // rows, up to BacklogRows().
  bool FlexibleSlices() const;
  // With FlexibleSlices(), the most rows of one batch cut from a backlog on instances of
  // `groups` serving B = `target`: where the profile says their capacity stops growing
  // (BacklogBatch), at the slowdowns measured when the set is made. Capacity is the best cover
  // of b rows on those instances (Optimizer::SolveOnInstances), where the dispatcher shares a
  // batch in proportion to the plan's b: the same for one thread count, close for mixed ones.
  // O(log max_batch) solves, no lock needed. 0 (B) otherwise.
  int64_t BacklogRows(const std::vector<InstanceGroup>& groups, int64_t target) const;
  // Rows/s that instances of `threads` threads (one entry per instance) serve in batches of
  // `b` (Optimizer::SolveOnInstances) at the measured slowdowns; nullopt where no cover of b
  // exists or its latency is TooSlow(). Needs optimizer_.
  std::optional<double> CapacityOn(const std::vector<int>& threads, int64_t b) const;
  // Whether a predicted batch latency is beyond batching.max_batch_latency_ms.
  bool TooSlow(double latency_ms) const;
  // A plan's batch latency: its slowest group's profiled latency at that thread count's
  // Slowdown(). Needs optimizer_.
  double PredictedLatencyMs(const Plan& plan) const;
  // Single-row requests arriving at `rate` rows/s on `plan` at the measured slowdowns, by
  // simulating the batching (BatchingSimulator, with this model's max_delay and
  // max_inflight_batches). Its p99 (ms, arrival to answer) is what plans are compared by at a
  // rate (SimulatedP99Ms); its mean batch latency what TooSlow judges at a rate: with two
  // batches in flight a batch is cut while the one before runs, so the batches are shorter
  // than a closed-form fixed point (LoadedBatchRows) says. Needs optimizer_. About a
  // millisecond.
  BatchingSimulator::Result Simulate(const Plan& plan, double rate) const;
  double SimulatedP99Ms(const Plan& plan, double rate) const { return Simulate(plan, rate).p99_ms; }
  // The plan `active` serves: its groups at B = target_rows (and the optimizer's latency, if it
  // made the plan, for groups the profile lacks).
  static Plan ServingPlan(const InstanceSet& active);
  // At a decision, for a batched model with reconfiguration.plan_at_rate and a known rate
  // `arriving` (rows/s): of the plans for each B (powers of two up to the estimator's largest;
  // PlanWithCapacity at the rate) that serve `arriving` at most max_utilization busy, the one
  // with the lowest SimulatedP99Ms (the smallest B on a tie). Moves to it where that p99 is more
  // than restart_margin below the serving set's, at most once per scale_down_delay_ms (with
  // ReplanAtRate's moves). Returns false, and leaves the decision to the estimator, where no
  // plan serves the rate so, or within scale_down_delay_ms of an overload move (whose step
  // down waits); true otherwise, moved or not. Control thread only.
  bool PlanAtRate(const InstanceSet& active, std::optional<double> arriving, SteadyTime now);
  // At an estimator decision that keeps B: moves to the plan for B that serves the rows
  // arriving (`arriving`, rows/s) with a p99 (SimulatedP99Ms) lower than the serving set's by
  // more than restart_margin (FasterAtRate, within PlanWithCapacity's restart margin), at most
  // once per scale_down_delay_ms: the slowdowns of the thread counts just left are the old ones
  // until they serve again, and the two plans' order at the rate may swap with them. Control
  // thread.
  void ReplanAtRate(const InstanceSet& active, std::optional<double> arriving, SteadyTime now);
  // Whether the moves at a rate (PlanAtRate, ReplanAtRate) wait: the last one was less than
  // scale_down_delay_ms before `now`. Control thread.
  bool RateMoveHeld(SteadyTime now) const;
  // Reconfigures to `plan` for a move at a rate and notes it for RateMoveHeld; a failure is
  // logged and leaves the serving set. Control thread; blocks while it reconfigures.
  void MoveAtRate(const Plan& plan, const std::string& reason, SteadyTime now);
  // The most rows a slice to a new runtime started for `batch` may carry; for a decoder, its
  // decode slots.
  int64_t SliceCapacity(int64_t batch) const;
  // reconfiguration.parked_runtimes resolved (auto: the thread budget, or the machine's
  // hardware threads without an allocator).
  size_t ParkLimit() const;
  // Whether `w` can serve ⟨threads, batch⟩ in a new set: the same shape or, with
  // ResizableRuntimes(), the same thread count and room for `batch` (Worker::capacity).
  bool CanServe(const Worker& w, int threads, int64_t batch) const;

  void ControlLoop();
  void Post(std::function<void()> job);
  // Samples the load for the estimator and acts on its decision. Control thread only.
  void Tick(SteadyTime now);
  // Moves to the estimator's `decision` for B where its plan is worth it (a step up that serves
  // more rows/s; a step down whose plan keeps up with the peak rate; not within
  // scale_down_delay_ms of an overload move), at the rate `arriving` over `window`. Returns
  // false where it keeps B, true where it reconfigured (or tried to). Control thread only.
  bool FollowEstimate(const InstanceSet& active, int64_t decision, std::optional<double> arriving,
                      std::chrono::milliseconds window, SteadyTime now);
  // How much slower instances of `threads` threads serve than the profile predicts (>= 1;
  // SlowdownTracker). Any thread.
  double Slowdown(int threads) const;
  // A plan for B = `b` and the rows/s it serves with full batches, each group at its thread
  // count's slowdown.
  struct PlanChoice {
    Plan plan;
    double capacity = 0;
    // The optimizer's plan where `plan` was taken instead: it needed new runtimes and
    // predicted batches at most reconfiguration.restart_margin faster.
    std::optional<Plan> passed_over;
    // A batch model's choice at a rate: Simulate(plan, rate), run once for every use.
    std::optional<BatchingSimulator::Result> simulated;
  };
  // The optimizer's plan for B = `b` or, for a batch model with `rate` (rows/s arriving), the
  // one whose requests see the lowest p99 at that rate (FasterAtRate judged by SimulatedP99Ms,
  // at max_utilization); with ResizableRuntimes(), the best plan on the runtimes of `serving`
  // instead where that one needs new runtimes and is not better by more than restart_margin
  // (by SimulatedP99Ms where the choice was made at a rate). Nullopt where the optimizer has no
  // plan, or its predicted latency is TooSlow(): with `rate`, the latency of the batches it would
  // run at that rate (a batch model's simulated, a decoder's by loaded_latency.h; at the
  // measured slowdowns), else of full ones. `capacity` is always at full batches. Control
  // thread only.
  std::optional<PlanChoice> PlanWithCapacity(int64_t b, const InstanceSet& serving,
                                             std::optional<double> rate) const;
  // Whether serving `plan` after `serving` starts runtimes: with ResizableRuntimes(), whether its
  // thread counts are more than those of `serving` and the live parked runtimes; otherwise
  // always (a conservative answer). Takes mu_.
  bool StartsRuntimes(const Plan& plan, const InstanceSet& serving) const;
  // The overload fast path (reconfiguration.overload_window_ms): reconfigures and returns true
  // when the rows arriving outrun the serving plan — fully busy, or at max_utilization where
  // the move starts no runtime (it costs nothing then). Control thread only; blocks while it
  // reconfigures.
  bool RelieveOverload(const InstanceSet& active, int64_t load);
  // A runtime died: retry its slices once elsewhere, fail the rest, schedule a restart.
  void OnWorkerDeath(std::vector<WorkSlice> orphans, const std::string& why);
  // Replaces dead runtimes on the control thread as soon as it gets to it (no backoff).
  void RestartSoon();
  // kOutOfRange (413) when not even one row of `request` fits a runtime's input slab.
  Status CheckRowFits(const InferenceRequest& request) const;

  // Publishes instance counts (serving "ready", old sets "draining") in the metrics. Requires mu_.
  void PublishInstancesLocked();
  DispatchObserver MakeDispatchObserver();
  // One batch a runtime computed (a slice, or a decode step of `rows` sequences) in `compute`:
  // into the batch-size and compute histograms and, after the runtime's first kColdSlices
  // batches of each size (which may run cold: a size it was not warmed up at), its ratio to
  // the profile's prediction for `threads` and `rows` into slowdowns_ (the profile timed one
  // instance alone; `profile` null: none). `seen` counts the runtime's batches per size; only
  // that runtime's completion thread calls this.
  void ObserveComputed(const Profile* profile, int threads, int64_t rows,
                       std::chrono::nanoseconds compute, std::map<int64_t, int>* seen);

  const ModelConfig config_;
  const ModelSignature signature_;
  uint64_t smallest_input_slab_ = 0;  // CheckRowFits' bound; 0: every row fits (set once)
  const ServedModelOptions options_;
  ProcessLauncher* const launcher_;

  std::atomic<ModelState> state_{ModelState::kLoading};
  mutable std::mutex mu_;
  std::string failure_;                                 // guarded by mu_
  std::shared_ptr<InstanceSet> active_;                 // guarded by mu_
  std::vector<std::shared_ptr<InstanceSet>> draining_;  // guarded by mu_
  // Parked runtimes (class comment), oldest first; guarded by mu_, changed by the control
  // thread only.
  std::vector<std::shared_ptr<Worker>> parked_;
  std::unique_ptr<BatchScheduler> scheduler_;      // set once by Load()
  metrics::CallbackHandle queue_rows_metric_;      // set once by Load()
  std::atomic<double> measured_batch_seconds_{0};  // EWMA of batch latency
  // How much slower than the profile each thread count serves (fed by the runtimes'
  // completion threads; a switch of sets is bracketed by Reconfigure).
  SlowdownTracker slowdowns_;
  static constexpr int kColdSlices = 2;  // each runtime's first slices of a size are left out

  // Layered batching: the instances told how many rows are queued (the serving set's).
  std::mutex hint_mu_;  // taken under the scheduler's lock; nothing is called while held
  std::vector<RuntimeInstance*> hint_targets_;  // guarded by hint_mu_
  void SetHintTargets(const InstanceSet& set);

  // Layered batching: the top-up policy of each thread count. Written by PrepareLayered (Load
  // and the control thread) before any runtime that uses the entry starts; guarded by mu_.
  std::map<int, std::shared_ptr<const TopUpPolicy>> top_up_policies_;

  // The optimizer over the model's profile (`instances: auto` only); control thread after Load.
  std::unique_ptr<Optimizer> optimizer_;
  const BatchingSimulator simulator_;  // its arrivals are drawn once; Run is const
  BatchSizeEstimator estimator_;       // control thread only (snapshot values copied under mu_)
  double estimator_ewma_ = 0;          // guarded by mu_
  int64_t estimator_estimate_ = 0;     // guarded by mu_
  bool adaptive_ = false;              // guarded by mu_
  uint64_t next_generation_ = 1;       // control thread (and Load) only
  // Rows accepted by Submit, ever; for a generative model, decode steps asked for by Generate.
  std::atomic<int64_t> rows_arrived_{0};
  // Rows accepted by Submit and not answered yet: the estimator's load. Shared with each
  // request's rows-finished observer (it counts rows out before their client is answered).
  std::shared_ptr<std::atomic<int64_t>> rows_in_system_ = std::make_shared<std::atomic<int64_t>>(0);
  // Rows accepted by Submit, sampled with the estimator's samples; control thread only.
  ArrivalRate arrival_rate_;
  SteadyTime last_restart_{};                     // control thread only
  std::optional<SteadyTime> last_overload_move_;  // control thread only
  std::optional<SteadyTime> last_rate_move_;      // ReplanAtRate's last move; control thread
  bool backlog_ = false;  // an overload move's backlog is draining; control thread only

  std::mutex control_mu_;
  std::condition_variable control_cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by control_mu_
  bool control_stop_ = false;               // guarded by control_mu_
  std::thread control_thread_;
};

}  // namespace packrat
