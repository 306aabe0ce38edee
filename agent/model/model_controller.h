// ModelController: the control thread of one served model. It runs every change of the
// model's instance sets in order, one at a time:
//   - plan changes from the management API (ApplyChange, posted by ServedModel::ChangePlan);
//   - the autoscaling policy's moves: every sample period it samples the load (LoadTracker),
//     asks the Autoscaler and carries out the Move it decides (InstanceSets::Switch), for
//     `instances: auto` models while adaptive;
//   - replacements for runtimes that died (at once when told, RestartSoon; again every
//     restart backoff while a start fails).
//
// Time comes from a Clock (Clock::Real() in production; a FakeClock in tests, which drives the
// loop's sampling and hold-offs by hand).
//
// Thread-safety: Post, RestartSoon, Snapshot and Stop may be called from any thread; ApplyChange
// and Tick run on the control thread (or, before Start and after Stop, on the caller's).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/config/config.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/model/set_switcher.h"
#include "agent/planning/autoscaler.h"
#include "agent/planning/load_tracker.h"
#include "agent/planning/slowdown_tracker.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/revision.h"

namespace packrat {

// A plan change asked for through the management API. Exactly one of `instances` (an explicit
// plan) or `batch` (the optimizer's plan for that B) may be set; `adaptive` alone turns the
// estimator's automatic reconfiguration on or off. An explicit plan or batch turns it off
// unless `adaptive` says otherwise.
struct PlanChange {
  std::optional<std::vector<InstanceGroup>> instances;
  std::optional<int64_t> batch;
  std::optional<bool> adaptive;
};

// What the node partition asks of a model (ModelController::Resize).
struct ResizeRequest {
  int threads = 1;           // the model's CPUs from now on: every plan is for this budget
  std::optional<Plan> plan;  // the partition's plan for them; nullopt: the optimizer's for B
  double rate = 0;           // rows/s it was planned for (arrivals, backlog); 0: the model's own
  // A shrink that another model's growth waits for: serve on the runtimes inside the smaller
  // share alone where they keep up, starting nothing; the switch to `plan` is asked for next.
  // Resize returns once the runtimes outside the share have drained. Otherwise (a growth, or a
  // switch inside the model's own CPUs) it returns once the new set serves, while the set it
  // replaced still finishes the slices it holds on CPUs the model keeps.
  bool at_once = false;
};

struct ModelControllerOptions {
  std::string model_name;
  Clock* clock = Clock::Real();                // not owned
  SetSwitcher* sets = nullptr;                 // not owned
  const SlowdownTracker* slowdowns = nullptr;  // not owned; the policy plans at them
  metrics::ModelMetrics* metrics = nullptr;    // not owned; null: no metrics
  Revision* revision = nullptr;                // not owned; bumped by every move and hold
  // A restart of dead runtimes is tried again this long after a failed attempt.
  std::chrono::milliseconds restart_backoff{5000};
  bool adaptive = false;  // the autoscaler's moves are carried out (instances: auto)
  // The load: rows (a decoder's sequences) queued or running and not answered yet; and the
  // running total of rows (decode steps asked for) that arrived. Any thread.
  std::function<int64_t()> rows_in_system;
  std::function<int64_t()> rows_arrived;
  // When the oldest request still waiting for a batch arrived; nullopt when none waits (or the
  // model has no queue). Any thread. Empty: never.
  std::function<std::optional<SteadyTime>()> oldest_queued;
  // Whether the model serves (not loading, failed or stopping): ticks and restarts do nothing
  // otherwise.
  std::function<bool()> serving;
};

// One move of the autoscaler and how its switch went.
struct MoveRecord {
  enum class State { kSwitching, kServing, kFailed };
  Reason reason;
  State state = State::kSwitching;
  std::string error;  // kFailed: why the new set did not start
};
std::string_view MoveStateName(MoveRecord::State state);

// What the management API shows of the control loop.
struct ControllerSnapshot {
  // Rows/s arriving: the larger of the rates over the last kRateSpan and over the last
  // kRiseSpan (0 until measured), so a rise shows within a second and a fall takes kRateSpan.
  double rate = 0;
  // The samples cover kRateSpan: `rate` is a measurement, not the 0 of a model just started
  // (whose traffic may not have begun, or not been seen, in its first second).
  bool rate_measured = false;
  // Where the arrivals stepped away from `rate` beyond Poisson noise, the rate since the step
  // (ArrivalRate::Shift over kShiftMinSpan to kRiseSpan): a step up or down shows within
  // kShiftMinSpan at nearly its full size. Nullopt: no step.
  std::optional<double> rate_shift;
  // The highest rate over stretches of reconfiguration.overload_window_ms (1 s where 0) within
  // the last scale_down_delay_ms (ArrivalRate::PeakOver; nullopt before a stretch fits, after
  // the arrivals restart, and where scale_down_delay_ms is 0): the peak that a move to less
  // capacity must respect, as the autoscaler's step down does (PeakAllows).
  std::optional<double> recent_peak;
  // Behind, observed: the oldest queued row has waited beyond Autoscaler::BehindWaitMs for a
  // whole reconfiguration.overload_window_ms on the serving set (the autoscaler's rule 0
  // signal, whether or not rule 0 could move: at the most capacity its CPUs allow, a model
  // stays behind). False where that window is 0, and again after each move or resize (the new
  // set's window starts when it serves). The node partition's rule 1 moves on it.
  bool behind = false;
  // Since when the arrivals have held their rate: the last sample that saw them step beyond
  // Poisson noise (rate_shift), or the first sample (nullopt before it). The node partition
  // expects a rate to hold about as long again as it has held (PartitionModel::rate_age).
  std::optional<SteadyTime> rate_since;
  double ewma = 0;
  int64_t estimate = 0;
  bool adaptive = false;
  std::optional<Reason> last_hold;
  std::vector<MoveRecord> moves;  // the last kRecentMoves, oldest first
};

class ModelController {
 public:
  // The spans the arrival rate in Snapshot() is measured over (the node partition's input):
  // a model whose load jumps gets its CPUs a decision after the jump (a 5-s rate alone would
  // move them seconds late), one whose load falls keeps
  // them for kRateSpan.
  static constexpr std::chrono::seconds kRateSpan{5};
  static constexpr std::chrono::seconds kRiseSpan{1};
  static constexpr std::chrono::milliseconds kShiftMinSpan{200};
  static constexpr double kShiftSigmas = 3;

  // `optimizer`: the model's profile for `instances: auto` (null for a static plan); not owned.
  ModelController(ModelControllerOptions options, Autoscaler autoscaler, LoadTracker load,
                  const Optimizer* optimizer);
  ~ModelController();  // Stop()s

  void Start();
  // Ends the loop after the job it runs; jobs that never ran then run on the caller's thread
  // (they see the model stopping). Idempotent. Blocks for the job in progress.
  void Stop();

  // Runs `job` on the control thread after the jobs before it; after Stop, at once on the
  // caller's thread.
  void Post(std::function<void()> job) EXCLUDES(mu_);
  // Replaces dead runtimes as soon as the control thread gets to it (no backoff).
  void RestartSoon();

  // Control thread: serves `change` (the management API's; validated by the caller). Blocks
  // while the new set starts and the old one drains.
  Status ApplyChange(const PlanChange& change);
  // Control thread: one sample of the load and what follows from it (see the class comment).
  void Tick(SteadyTime now);
  // Control thread: the node partition gave the model `request.threads` CPUs. Plans are for
  // that budget from now on; the model switches to `request.plan` (the partition's plan for
  // it), or, where the partition has none (none serves the rate there), to the plan of most
  // capacity on the new budget (Autoscaler::MostCapacity) — keeping its serving
  // runtimes, or in stages, where that avoids starting runtimes beside busy ones
  // (SwitchForResize). Stays adaptive. Blocks while the new set starts (and, for a shrink
  // `at_once`, while the old one drains: ResizeRequest).
  Status Resize(const ResizeRequest& request);

  // How much slower (p99, a fraction) than the partition's plan a resize may serve to keep its
  // serving runtimes (SwitchForResize).
  static constexpr double kResizeMargin = 0.25;
  // The same while the model is behind (a queue beyond two batches): a resize that would
  // otherwise migrate in stages, each a start, serves on a plan within 2× of the partition's.
  static constexpr double kBehindResizeMargin = 1.0;
  // How a resize's switch reaches the partition's plan, in the order SwitchForResize tries:
  enum class ResizeStep {
    kInsideAtOnce,  // 0: a shrink's runtimes inside the smaller share alone, at once
    kKeeping,       // 1: a plan keeping the serving runtimes within the resize margin
    kStage,         // 2: a stage towards the plan, starting runtimes on free CPUs only
  };                // (else the partition's plan itself)
  // "at once on the runtimes inside it", "keeping the serving runtimes", "stage": the reason a
  // resize's switch gives after "node partition: N CPU(s)".
  static std::string_view ResizeStepName(ResizeStep step);

  ControllerSnapshot Snapshot() const EXCLUDES(mu_);
  // The policy; its const methods are safe from any thread.
  const Autoscaler& autoscaler() const { return autoscaler_; }

 private:
  void Loop() EXCLUDES(mu_);
  // The measured slowdowns as the policy takes them (empty without a tracker: 1).
  SlowdownFn Slowdowns() const;
  // What the policy sees of `active`: its plan, the parked runtimes and the slowdowns (not the
  // load, the queue or the start times, which Tick adds).
  ServingView ViewOf(const InstanceSet& active) const;
  // Resize's switch to `fresh` (the partition's plan for the new budget) at `rate` rows/s:
  // with `at_once`, the runtimes inside the share alone where they keep up; else a plan keeping
  // the serving runtimes where it is within kResizeMargin of fresh's p99; else fresh, reached in
  // stages that start runtimes only on free CPUs (migration.h; at most kMaxResizeStages).
  Status SwitchForResize(const Plan& fresh, double rate, bool at_once, const std::string& why)
      EXCLUDES(mu_);
  // The switch to `fresh` in stages (migration.h), each starting runtimes only on the model's
  // free CPUs and dropping old ones only while the rest serves min(`need` rows/s, what it served
  // before the drop) within the p99 bound set at the first stage (StageP99BoundMs; a stage that
  // starts nothing may go beyond it by the drops that free the next start's CPUs), at most
  // kMaxResizeStages; then fresh itself, at once. With `keep_margin`, before each stage: a plan
  // keeping the serving runtimes within that margin of fresh's p99 at `rate` ends it instead
  // (Autoscaler::KeepingPlan). Where nothing is free to start on and nothing can go (an
  // overloaded model), fresh at once: its new runtimes start beside the busy ones. Stages are
  // judged at `slowdown`. Blocks while each stage's set starts and, but for the last, while
  // the set it replaced drains (its dropped runtimes free the next stage's CPUs). Ends after a
  // stage, that stage serving, where a job is waiting (Superseded): a resize or management
  // change then runs without waiting for the stages left, which head for the old budget or plan.
  Status Migrate(const Plan& fresh, std::optional<double> rate, double need,
                 const SlowdownFn& slowdown, std::optional<double> keep_margin,
                 const std::string& why) EXCLUDES(mu_);
  // Whether a job is waiting behind the one running (or the controller stops).
  bool Superseded() const EXCLUDES(mu_);
  // Tick's switch for the autoscaler's `move`: a batch model with resizable runtimes migrates
  // (Migrate, no keeping plan: the policy chose the plan), so that a move on a model holding
  // all its CPUs hands them over instead of starting the new set beside the busy one; others
  // switch at once.
  Status SwitchForMove(const Move& move) EXCLUDES(mu_);
  static constexpr int kMaxResizeStages = Autoscaler::kMaxHandoverStages;
  // ControllerSnapshot::recent_peak, from the arrivals (the control thread).
  std::optional<double> RecentPeak() const;
  // Records ControllerSnapshot::behind from the autoscaler's state at `now` (the control thread).
  void NoteBehind(SteadyTime now) EXCLUDES(mu_);
  // Records `r` as the last hold and logs it (a quiet hold is not logged).
  void NoteHold(const Reason& r) EXCLUDES(mu_);
  // Records a move as switching, then (Done) how its switch ended.
  void NoteMove(const Reason& r) EXCLUDES(mu_);
  void NoteMoveDone(const Status& status) EXCLUDES(mu_);
  void Changed() const {
    if (options_.revision) options_.revision->Bump();
  }

  const ModelControllerOptions options_;
  const Optimizer* const optimizer_;
  // The policy and its inputs: the control thread only.
  Autoscaler autoscaler_;
  LoadTracker load_;
  // The arrivals again, never restarted: the autoscaler restarts load_'s after a move of rule 0
  // or 1 (its next decision waits for a window of its own), but the peak a share must respect
  // (RecentPeak) is what arrived, the burst that caused the move included.
  ArrivalRate observed_;
  SteadyTime last_restart_{};

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  bool adaptive_ GUARDED_BY(mu_) = false;
  double rate_ GUARDED_BY(mu_) = 0;
  bool rate_measured_ GUARDED_BY(mu_) = false;
  std::optional<double> rate_shift_ GUARDED_BY(mu_);
  std::optional<double> recent_peak_ GUARDED_BY(mu_);
  bool behind_ GUARDED_BY(mu_) = false;
  std::optional<SteadyTime> rate_since_ GUARDED_BY(mu_);
  double ewma_ GUARDED_BY(mu_) = 0;
  int64_t estimate_ GUARDED_BY(mu_) = 0;
  static constexpr size_t kRecentMoves = 16;
  std::deque<MoveRecord> moves_ GUARDED_BY(mu_);
  std::optional<Reason> last_hold_ GUARDED_BY(mu_);
  std::thread thread_;
};

// The autoscaler's settings for `config`, planning for `threads` threads.
AutoscalerOptions AutoscalerOptionsFor(const ModelConfig& config, int threads, bool resizable);
// The load tracker of `config` (estimator and arrival-rate spans).
LoadTracker LoadTrackerFor(const ModelConfig& config);

}  // namespace packrat
