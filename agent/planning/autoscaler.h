// Autoscaler: the autoscaling policy of an `instances: auto` model — which plan to serve, as the
// load changes — as a pure unit: no threads, no processes, no clock. The model's control thread
// samples the load into a LoadTracker, describes what serves now in a ServingView, asks
// Decide(), carries out the Move it gets (a switch of instance sets) and reports the outcome
// with Applied(). Tests do the same with made-up profiles and hand-made time points.
// The policy itself is a pure function of its inputs and a PolicyState: the const Decide()
// returns the next state with the decision, and AfterMove() the state after a move; the
// stateful Decide()/Applied() keep that state here for an owner that does not.
//
// The rules, in the order Decide() applies them (docs/architecture.md, "Autoscaling"; kRules
// and kVetoes in autoscaler.cc list them so): the first that decides ends the decision, and
// the vetoes then weigh its move.
//   0. Behind, observed (above every cost model): the oldest request still waiting for a batch
//      has waited longer than BehindWaitMs() at every sample for overload_window_ms: move at
//      once to the plan of most capacity the CPUs allow (MostCapacity: the smallest B near
//      the most), where it runs more
//      than the serving set. It is never held: a start cost is no reason to stay behind, and
//      the move is staged as any other (no capacity is dropped before its replacement
//      serves). The wait sees what the arrival rate cannot: clients with a bounded
//      connection pool send less once latency grows, so an overload hides its own rate, but
//      never its queue. Its backlog then drains before the estimator is listened to again,
//      as after rule 1.
//   1. Overload (reconfiguration.overload_window_ms): rows arrive faster than the serving plan
//      runs them (fully busy, in the batches it cuts from a backlog; or above max_utilization
//      where the move starts no runtime beside the busy ones, only runtimes of thread counts
//      already measured, and, for a batch model, its requests' simulated p99 at the rate is
//      below the serving set's, at B or its backlog batch) while rows queue
//      beyond B: move at once, among the plans of every B that serve kBatchForRateMinGain
//      more than the serving set, to the one of the lowest simulated p99 at the rate of those
//      that keep up beyond chance — or, where none does, to the smallest near the most
//      capacity where that serves kBatchForRateMinGain more (OverloadBatch; PlanFor puts
//      capacity first where a plan cannot serve the rate). Its backlog then drains before the
//      estimator is
//      listened to again — unless a queue still stands once the estimator's window holds only
//      samples taken since the move: that queue is the load (a bounded client pool refills it
//      as fast as it is served) — and the estimator's steps down wait scale_down_delay_ms.
//   2. At each of the estimator's decision points (every 100 samples of
//      reconfiguration.sample_period_ms), with a full window:
//      a. the estimator's B̃ (packrat-paper §3.8): a step up only as far as capacity
//         still grows (StepUpBatch); a step down not within scale_down_delay_ms of an overload
//         move or of the arrivals' first count, nor while they still rise above their mean over
//         that span (the peak it must absorb is not known before: WithinScaleDownDelay), nor where
//         the serving plan's simulated p99 at the rate meets batching.p99_target_ms
//         (ServingMeetsTarget: a lower p99 than the target asks for does not pay for the capacity
//         given up) — both bind only plans that give up capacity (GivesUpCapacity): one of as
//         much meets any peak the serving set meets, and goes for a lower p99; only as far as the
//         recent peak arrivals allow and to plans that run min_capacity, to the smallest B whose
//         p99 is near the lowest, where the serving plan's is not near it (StepDownBatch: capacity
//         is given up only for a lower p99) — or, among the plans whose p99 is within
//         the burst reserve (burst_reserve_ms) of the lowest, serving one included, to the one
//         whose runtimes serve the most from a backlog: a burst they absorb by cutting larger
//         batches needs no switch;
//      b. where B stays, the plan for B at the rate arriving, where its simulated p99 is more
//         than the restart margin below the serving plan's (at most once per scale_down_delay_ms)
//         and it runs min_capacity or what the serving plan does; only a plan that serves the
//         rate max_utilization busy (another's p99 is of a growing queue, and an overload is
//         rule 1's), and one that gives up capacity (GivesUpCapacity) only as a step down would
//         go: not within scale_down_delay_ms of an overload move or of the arrivals' first
//         count, nor where the serving plan meets the p99 target, nor where the recent peak
//         would have overloaded it (PeakAllows).
//   3. A move of 2 that would start runtimes on CPUs the serving set keeps busy — no staged
//      hand-over (migration.h) gets there: nothing is free to start on and no runtime can go
//      while the rest keeps up — is held while the serving plan is more than
//      kHandoverUtilization busy at the rate (its capacity in the batches it cuts from a
//      backlog): both sets' threads would share those CPUs until the new set serves, each at
//      about half speed (the emulator's contention model), and a set more than half busy falls
//      behind for that long (the 16-core switch that took 10.9 s). Less busy, it keeps up at
//      half speed. Held unless the move repays that (SwitchRepays): for the S seconds the
//      start takes (the model's measured starts: twice its first, idle one, or its latest
//      switch's where longer; unknown: held), rows queue at rate − capacity / 2, and the new
//      plan drains them at its capacity − rate; that queue's row-seconds of waiting against the
//      mean latency the new plan saves each row arriving over scale_down_delay_ms (simulated
//      at the rate less two Poisson standard deviations of its count over the window it was
//      measured on, the serving plan's at B or at its backlog batch, whichever is lower:
//      near capacity a burst would otherwise buy a switch). With batching.p99_target_ms,
//      held too where the serving plan's simulated p99 meets the target and the start's would
//      not: twice the serving p99 (its batches at half speed) plus the queue's wait for the
//      new plan's capacity. Where rows pile up beyond its capacity the overload rule (1),
//      never held, moves at once.
//   Plans count each thread count at its measured slowdown (ServingView::slowdown), one not
//   served yet at its profile (SlowdownTracker): a shape the profile flatters is served,
//   measured, and left by rule 0 where it falls behind. But whether a move gives up capacity
//   (2a, 2b) is judged with a thread count not yet served at the least slowdown measured on any
//   (CautiousEvaluator): a shape is explored for a lower latency where the serving plan misses
//   its target, never at the risk of capacity where it meets it.
//   Every plan is the optimizer's for its B, or — where runtimes serve any b up to max_batch —
//   the best plan on the serving runtimes where the optimizer's would start runtimes and is not
//   better by more than the restart margin (runtimes of parked shapes start nothing); none whose
//   batches break batching.max_batch_latency_ms.
//
// Thread-safety: the const members may be called from any thread; the rest, one owner (the
// model's control thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/planning/batch_for_rate.h"
#include "agent/planning/batching_simulator.h"
#include "agent/planning/instance_group.h"
#include "agent/planning/load_tracker.h"
#include "agent/planning/migration.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/plan_evaluator.h"

namespace packrat {

// The model's settings the policy works with (ModelConfig's batching and reconfiguration).
struct AutoscalerOptions {
  int threads = 1;          // T: the threads every plan is solved for
  int64_t max_batch = 1;    // batching.max_batch: the largest B
  bool generative = false;  // a decoder: B is decode slots; no rate rules, no overload path
  // The runtimes serve any b up to max_batch (ServedModel::ResizableRuntimes): a plan that
  // keeps their thread counts starts nothing.
  bool resizable_runtimes = false;
  PlanEvaluatorOptions evaluation;  // max_delay, inflight batches, batch-latency limit
  int64_t window = 50;              // the estimator's n
  int64_t sample_period_ms = 100;
  double max_utilization = 0.8;
  int64_t overload_window_ms = 2000;  // 0: no overload path
  int64_t scale_down_delay_ms = 30'000;
  // A plan that needs new runtimes where one on the serving runtimes predicts batches at most
  // this fraction slower is passed over (docs/configuration.md, "Policy keys and constants").
  double restart_margin = 0.1;
  // reconfiguration.min_capacity: rows/s a step down's plan (2a) and a plan for the same B (2b)
  // must run fully busy, unless it runs at least what the serving plan does (0: none).
  double min_capacity = 0;
  // The simulated p99 (ms) a step down (2a) gives up for runtimes that serve more from a
  // backlog (StepDownBatch's BurstReserve; 0: none): kBurstReserveShare of the batch-latency
  // limit (docs/configuration.md, "Policy keys and constants").
  double burst_reserve_ms = 0;
  static constexpr double kBurstReserveShare = 0.05;
  // batching.p99_target_ms: a move that starts runtimes beside busy ones is not taken where
  // the serving plan's simulated p99 meets it and the start's would not (SwitchRepays; 0: none).
  double p99_target_ms = 0;
};

// What serves now.
struct ServingView {
  int64_t batch = 0;          // B of the serving set
  int64_t backlog_batch = 0;  // the most rows of a batch it cuts from a backlog (<= B: B)
  std::vector<InstanceGroup> groups;
  // The optimizer's batch latency where it made the serving plan: what a group the profile
  // lacks counts at.
  double plan_latency_ms = 0;
  std::vector<int> parked_threads;  // thread counts of the live parked runtimes
  SlowdownFn slowdown;              // measured (empty: 1)
  // Whether a thread count has served long enough to be measured (SlowdownTracker::Measured;
  // empty: none has).
  std::function<bool(int threads)> measured;
  // How long the oldest request still waiting for a batch has waited (ms; 0: none waits).
  double oldest_wait_ms = 0;
  // Seconds the model's runtimes took to start and serve: its first set (at load) and its
  // latest switch that started any (SetSwitcher::StartTimes); 0: none yet. Rule 3's cost.
  double first_start_s = 0;
  double last_start_s = 0;
  bool adaptive = false;  // whether decisions move the model
};

enum class Rule {
  // Moves.
  kBehind,             // 0: the oldest queued row waited too long for a whole window
  kOverload,           // 1: rows arrive faster than the serving plan runs them
  kEstimatorStepUp,    // 2a
  kEstimatorStepDown,  // 2a
  kReplanAtRate,       // 2b
  // Holds: a rule looked at moving and kept the serving plan.
  kBacklogDraining,       // an overload move's backlog still drains: the estimator waits
  kBacklogDrained,        // ... it has drained: the estimator starts afresh
  kStepUpGainsTooLittle,  // no larger B up to the estimate serves kBatchForRateMinGain more
  kScaleDownDelay,        // a step down within scale_down_delay_ms of an overload move, or of
                          // the arrivals' first count
  kPeakGuard,             // every smaller plan would have been overloaded by a recent peak
  kServingP99Lowest,      // the serving plan's simulated p99 is near the lowest of the smaller
                          // ones, or below it
  kMinCapacity,           // every smaller plan runs less than min_capacity
  kBurstReserve,          // the serving runtimes serve more from a backlog, at a p99 near
                          // the lowest (burst_reserve_ms)
  kNoPlan,                // no plan for the estimate within the batch-latency limit
  kIdleDecodeSlots,       // a decoder's step down with the same thread counts changes nothing
  kWithinRestartMargin,   // a better plan at the rate, but not by more than restart_margin
  kBehindAtMostCapacity,  // behind (rule 0), but no plan runs more than the serving set
  kWithinTarget,          // a plan of less capacity, where the serving plan's simulated p99
                          // at the rate meets batching.p99_target_ms
  kNoHandover,            // a move would start runtimes beside a busy set (see class comment)
  // Keep kNoHandover last, or change RuleName's table, which counts to it.
};
// "overload", "replan_at_rate", ... (for logs and the management API).
std::string_view RuleName(Rule rule);
bool IsMove(Rule rule);

// Why the policy moved or held, with the figures it judged by. Unset figures did not apply.
struct Reason {
  Rule rule = Rule::kOverload;
  int64_t from_batch = 0;           // B serving
  int64_t to_batch = 0;             // B moved to; for a hold, the B it looked at (0: none)
  int64_t estimate = 0;             // the estimator's B̃ where the rule acted on it (0: none)
  double ewma = 0;                  // the estimator's moving average of the rows in the system
  std::optional<double> rate;       // rows/s arriving, as the rule judged them
  std::optional<double> peak_rate;  // rows/s: the recent peak a step down allowed for
  std::optional<double> serving_capacity;  // rows/s the serving plan runs fully busy
  std::optional<double> target_capacity;   // rows/s the plan moved to (or looked at) runs
  std::optional<double> serving_p99_ms;    // simulated at `rate`
  std::optional<double> target_p99_ms;     // simulated at `rate`
  // Overload: the serving set ran batches of up to this many rows from its backlog (> B).
  int64_t backlog_batch = 0;
  // Overload: the arrivals exceeded max_utilization of capacity, not capacity (a move that
  // starts no runtime).
  bool busy_only = false;
  // The optimizer's plan for to_batch, passed over for one on the serving runtimes (it needed
  // new runtimes and was not faster by more than restart_margin).
  std::optional<Plan> passed_over;
  // Behind (rule 0): the oldest queued row's wait, and the wait it was judged against.
  std::optional<double> oldest_wait_ms;
  std::optional<double> behind_wait_ms;
  // Whether the log should say it (the quiet holds recur at every decision).
  bool quiet = false;
  std::string text;  // for the log: the rule in words with the figures above
};

struct Move {
  Plan plan;
  Reason reason;
  std::chrono::steady_clock::time_point decided_at;
};

// What the policy remembers between decisions. Decide() reads it and returns the next one,
// as does AfterMove(); nothing else changes it.
struct PolicyState {
  using SteadyTime = std::chrono::steady_clock::time_point;
  // The last overload or behind move carried out (rules 0, 1): the estimator's steps down and
  // the moves at a rate wait scale_down_delay_ms after it.
  std::optional<SteadyTime> last_overload_move;
  // The last move at a rate tried (2b): the next waits scale_down_delay_ms.
  std::optional<SteadyTime> last_rate_move;
  // Since when every sample has seen the oldest queued row wait beyond BehindWaitMs (rule 0).
  std::optional<SteadyTime> behind_since;
  SteadyTime last_applied{};  // the last move carried out: rule 0's window starts after it
  bool backlog = false;       // an overload move's backlog is draining
};

struct Decision {
  std::optional<Move> move;
  std::optional<Reason> hold;  // where a rule kept the serving plan (also beside a move)
  // Forget the arrival history before carrying out the move (an overload move: the next try
  // waits for a new window, whatever the outcome).
  bool restart_arrivals = false;
  PolicyState next;  // the policy's state after this decision
  // What the owner does to its estimator after this decision: restart it (a backlog has
  // drained), or take its decision at the grid point reached (BatchSizeEstimator::Decide).
  bool restart_estimator = false;
  bool advance_estimator = false;
};

class Autoscaler {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // `optimizer`: the model's profile; null (a static plan) makes Decide() only keep the
  // estimator's decision grid going. Not owned; outlives the autoscaler.
  Autoscaler(AutoscalerOptions options, const Optimizer* optimizer);

  // The policy's decision in `state` after a sample `load` took at `now` (LoadTracker::Sample
  // returned true), with the state after it (Decision::next) and what the estimator is to do.
  // Pure: it changes nothing. Microseconds to milliseconds (simulations at a rate).
  Decision Decide(const ServingView& view, const LoadTracker& load, const PolicyState& state,
                  SteadyTime now) const;
  // The state after carrying out `move` in `state` (ok: the new set serves) at `now`;
  // *restart_estimator: whether what the estimator saw is stale (an overload move's backlog).
  static PolicyState AfterMove(PolicyState state, const Move& move, bool ok, SteadyTime now,
                               bool* restart_estimator);

  // The same for an owner that keeps the state here: Decide() above on state(), then the state
  // and the estimator as the decision says. Applied(): AfterMove on state(). Reset(): a plan
  // set from outside (the management API) ends the overload hold-off, rule 0's window and the
  // backlog.
  Decision Decide(const ServingView& view, LoadTracker& load, SteadyTime now);
  void Applied(const Move& move, bool ok, SteadyTime now, LoadTracker& load);
  void Reset();
  const PolicyState& state() const { return state_; }

  // The plan the policy would serve for B = `b` on `view` at `rate` rows/s (nullopt: at full
  // batches) with the rows/s it serves at full batches — at a rate the lowest simulated p99
  // among plans that serve it max_utilization busy (FasterAtRate), or where B's optimizer plan
  // cannot, the one of most capacity (MoreCapacity); nullopt where none is within the
  // batch-latency limit (`bounded` false: whatever its batches take). `floor`: rows/s the plan
  // must run fully busy where one for B does (a step that gives up no capacity, rule 2a):
  // FasterAtRate and the serving runtimes' plan look only among those. Exposed for tests and
  // the management API.
  struct PlanChoice {
    Plan plan;
    double capacity = 0;
    std::optional<Plan> passed_over;                     // see Reason::passed_over
    std::optional<BatchingSimulator::Result> simulated;  // at `rate`, batch models
  };
  std::optional<PlanChoice> PlanFor(int64_t b, const ServingView& view, std::optional<double> rate,
                                    bool bounded = true, double floor = 0) const;

  // The most rows of one batch worth cutting from a backlog on instances of `groups` serving
  // B = `target` (BacklogBatch: where their capacity stops growing, at `slowdown`); 0 (B) unless
  // the runtimes are resizable batch runtimes. Capacity is the best cover of b rows on those
  // instances (Optimizer::SolveOnInstances), where the dispatcher shares a batch in proportion
  // to the plan's b: the same for one thread count, close for mixed ones. Const: any thread.
  int64_t BacklogRows(const std::vector<InstanceGroup>& groups, int64_t target,
                      const SlowdownFn& slowdown) const;

  // The best plan on `instances` (thread counts; some may stay idle) for B = `batch` (at a
  // rate also every power-of-two multiple of the instance count up to `largest_batch`, 0:
  // max_batch) with at least `need` rows/s of capacity: the lowest simulated p99 at `rate`
  // (full-batch latency where the rate is unknown; the most capacity where none serves the rate);
  // nullopt where none qualifies. For the node partition's resizes and their stages.
  struct OnInstances {
    Plan plan;
    double p99_ms = 0;    // simulated at the rate, or the batch latency
    double capacity = 0;  // rows/s at full batches
  };
  std::optional<OnInstances> PlanOnInstances(const std::vector<int>& instances, int64_t batch,
                                             std::optional<double> rate, const SlowdownFn& slowdown,
                                             double need, int64_t largest_batch = 0) const;
  // The capacity a plan replacing `fresh` must have: fresh's, or max_utilization to spare at
  // `rate` where that is less.
  double NeededCapacity(const Plan& fresh, std::optional<double> rate,
                        const SlowdownFn& slowdown) const;
  // The node partition gave the model options().threads CPUs (set_threads) and `fresh` as its
  // plan there, which would start every runtime anew beside the serving ones. Where the
  // runtimes are resizable: the plan that keeps `keepable` (thread counts of the serving
  // runtimes inside the new share, KeepableThreads) and starts runtimes only on the CPUs they
  // leave — a shrink then starts none, a growth starts only on the CPUs it gains, beside no
  // busy runtime — if it serves `rate` rows/s (nullopt: unknown; then full batches count)
  // within `margin` (a fraction) of fresh's p99 and keeps up with the rate as well as fresh
  // does (where fresh itself cannot serve the rate with max_utilization to spare, p99s are of
  // growing queues: then at least fresh's capacity / (1 + min(margin, kKeepCapacityMargin)),
  // whatever the p99s). Nullopt
  // otherwise (then fresh is the plan). Tries the kept runtimes alone first (a switch that starts
  // nothing), then each thread count of `keepable` and of fresh for the runtimes to add
  // (PlanOnInstances each: a few dozen simulations at most).
  // `budget`: the CPUs planned for, where not options().threads (0): the node controller asks
  // before a move whether a shrink to `budget` CPUs would keep its runtimes.
  std::optional<Plan> KeepingPlan(const std::vector<int>& keepable, const Plan& fresh,
                                  std::optional<double> rate, const SlowdownFn& slowdown,
                                  double margin, int budget = 0) const;

  static constexpr double kKeepCapacityMargin = 0.25;
  // Rule 3: above this share of the serving plan's capacity at the rate arriving, a move
  // without a hand-over waits.
  static constexpr double kHandoverUtilization = kSharedCpuSpeed;
  // The stages a hand-over may take (ModelController carries out at most as many).
  static constexpr int kMaxHandoverStages = 8;

  // Whether the switch from the serving runtimes (thread counts `serving`, on options().threads
  // CPUs) to `fresh` can go in stages that each start runtimes only on free CPUs
  // (NextMigrationStep, at most kMaxHandoverStages, each keeping min(NeededCapacity, its
  // capacity before the drop) and, but for drops that free the next start's CPUs, its p99 at
  // `rate` within StageP99BoundMs; StageEstimates at `serving_batch`, the serving set's B, 0:
  // fresh's B alone). Pure; a few PlanOnInstances per stage.
  bool HandsOver(const std::vector<int>& serving, const Plan& fresh, std::optional<double> rate,
                 const SlowdownFn& slowdown, int64_t serving_batch = 0) const;
  // What a hand-over stage towards `fresh` serves (NextMigrationStep's `estimate`): the rows/s
  // of the best plan on the stage's runtimes at `rate` for a B up to the larger of fresh's and
  // `serving_batch` (the serving set's), and its p99 there (PlanOnInstances): a stage of fewer
  // runtimes at a larger B cuts a backlog into slices neither end runs, each longer than
  // either end's batches; capacity 0 and an infinite p99 where none; overloaded where the capacity
  // is at most `rate`. `serving_batch` 0: fresh's B alone. Refers to *this; call while it lives.
  StageEstimator StageEstimates(const Plan& fresh, std::optional<double> rate, SlowdownFn slowdown,
                                int64_t serving_batch) const;

  const AutoscalerOptions& options() const { return options_; }
  // The node partition gave the model a new CPU budget: plans from now on are for `threads`.
  void set_threads(int threads) { options_.threads = threads; }

  // Rule 0's plan, also the node partition's for a share where none serves the rate
  // (ModelController::Resize). The plan of most capacity over every B up to max_batch — the
  // smallest B whose plan runs within kBatchForRateNearMost of the most (a larger B is worth its
  // longer batches only while it serves more: StepUpBatch from no batch) — whatever its batches
  // take: behind, latency is already lost, and a limit measured slowdowns push every plan past must
  // not leave the model where it falls behind; but a row in a batch waits for all of it, whatever
  // comes next (more CPUs, a lighter load). Nullopt where no B has a plan.
  std::optional<PlanChoice> MostCapacity(const ServingView& view) const;

 private:
  // For a reason's text: why a plan on the serving runtimes was taken instead of the
  // optimizer's; "" if it was not.
  // A plan's rows per second at full batches, or why B has no plan.
  static std::string CapacityText(const std::optional<double>& rows_per_s);
  static std::string PassedOverNote(const Plan& taken, const std::optional<Plan>& passed_over,
                                    double margin, bool generative);
  PlanEvaluator Evaluator(const ServingView& view) const;
  // Evaluator(), but a thread count not yet measured (ServingView::measured) counts at least
  // at the least slowdown measured on any, from the first one measured, and none counts below
  // 1: for whether a move gives up capacity (GivesUpCapacity). The profile may rank a shape not
  // yet served; it may not promise capacity that no served one has shown. And capacity is what
  // a plan runs fully busy, beside busy neighbours, as the profile was timed: a slowdown below
  // 1 is measured while neighbours idle, and would credit the serving set alone with it. Refers
  // to `view`: use it while the view lives (one decision).
  PlanEvaluator CautiousEvaluator(const ServingView& view) const;
  // The capacity a move must not give up without knowing the peak (rules 2a and 2b): the rows/s
  // `plan` serves fully busy or, with batching.p99_target_ms, the most it serves within the
  // target (PlanEvaluator::MaxRate; fully busy where the profile lacks a thread count): rows/s
  // served only beyond the target are no capacity a user keeps, and a plan of large batches
  // may spend much of the target on one batch. Judged with `eval` (CautiousEvaluator).
  double CapacityToKeep(const Plan& plan, const PlanEvaluator& eval) const;
  // Whether `plan` has less CapacityToKeep than the serving set, judged with
  // CautiousEvaluator: a move that gives up capacity must know the peak it meets and be paid
  // for by a lower p99 than the target asks (rules 2a and 2b); one that does not meets any
  // peak the serving set meets.
  bool GivesUpCapacity(const Plan& plan, const ServingView& view) const;
  // Whether `plan`'s CapacityToKeep at `eval` is below `to_keep`; it simulates only a plan
  // whose capacity fully busy (an upper bound) is not.
  bool KeepsLess(const Plan& plan, double to_keep, const PlanEvaluator& eval) const;
  // The candidate table: what each B offers on `view` at one rate (PlanFor: its plan, the rows/s
  // it serves fully busy, its simulated requests; from a backlog; whether it starts runtimes),
  // computed once per decision, as the rules first ask for each B. Lives for one decision, on
  // the thread that decides; refers to the view and the autoscaler.
  class Candidates {
   public:
    // `rate` nullopt: at full batches. `bounded` false: whatever a plan's batches take.
    Candidates(const Autoscaler& policy, const ServingView& view, std::optional<double> rate,
               bool bounded = true)
        : policy_(policy), view_(view), rate_(rate), bounded_(bounded) {}
    // B's plan; nullopt where B has none (within the batch-latency limit, where bounded).
    const std::optional<PlanChoice>& At(int64_t b) const;
    std::optional<double> Capacity(int64_t b) const;
    // Rows/s B's plan serves from a backlog (BurstCapacity); nullopt where B has no plan.
    std::optional<double> Burst(int64_t b) const;
    // B's plan's simulated p99 (ms) at the rate; nullopt where B has no plan or no rate is set.
    std::optional<double> P99(int64_t b) const;
    std::optional<double> rate() const { return rate_; }

   private:
    const Autoscaler& policy_;
    const ServingView& view_;
    const std::optional<double> rate_;
    const bool bounded_;
    mutable std::map<int64_t, std::optional<PlanChoice>> plans_;
  };

  // One decision's inputs, as every rule and veto sees them.
  struct Inputs {
    const ServingView& view;
    const LoadTracker& load;
    const PolicyState& state;
    SteadyTime now;
    bool acting = false;  // view.adaptive, with a profile to plan on
    // The estimator's window and the rows/s arriving over it (nullopt: not measured yet).
    std::chrono::milliseconds window{0};
    std::optional<double> arriving;
    // The estimator's B̃ at a decision point reached now (nullopt: none, or B stays).
    std::optional<int64_t> estimate;
    const Candidates& candidates;  // at `arriving`
  };
  // A rule (the class comment's numbers): true where it decided — a move, or a hold that ends
  // the decision. A rule that holds without deciding leaves its hold unless one is set (the
  // first rule that held is the one reported), and a later rule may move beside it.
  using RuleFn = bool (Autoscaler::*)(const Inputs& in, Decision* d) const;
  // A veto: may turn a move of rule 2 into a hold (rule 3).
  using VetoFn = void (Autoscaler::*)(const Inputs& in, Decision* d) const;
  // The rules in the order Decide() applies them, and the vetoes applied after them.
  static const RuleFn kRules[];
  static const VetoFn kVetoes[];

  // Between rules 1 and 2: an overload move's backlog drains before the estimator is listened
  // to again; once drained, the estimator starts afresh. A queue that stands for the
  // estimator's whole window since the move ends the wait without a restart.
  bool DrainBacklog(const Inputs& in, Decision* d) const;
  // Rule 2's gate: its rules act only at the estimator's decision points, with a full window,
  // on an adaptive model with a profile (the grid advances as it is reached, acting or not).
  bool AtDecisionPoint(const Inputs& in, Decision* d) const;
  // Rule 0 (autoscaler_behind.cc). Its bound: twice the longest a queued row waits while the
  // serving set keeps up — the batching delay and the max_inflight_batches slices an instance
  // holds ahead of it, each as long as a batch of the plan (at the backlog batch where it cuts
  // one) — or twice batching.p99_target_ms where that is longer.
  double BehindWaitMs(const ServingView& view) const;
  // Rule 0 (see the class comment): sets d->next.behind_since; true where it decided.
  bool CatchUp(const Inputs& in, Decision* d) const;
  // What the serving set runs fully busy, in the batches it cuts from a backlog where larger
  // (as the overload rule counts it).
  double ServingCapacity(const ServingView& view) const;
  // What runtimes of `plan` serve fully busy, in the batches they would cut from a backlog
  // where larger (BacklogRows): what a burst meets without a switch.
  double BurstCapacity(const Plan& plan, const ServingView& view) const;
  // The serving plan as a Plan (its groups at B, the optimizer's latency for unprofiled ones).
  static Plan ServingPlan(const ServingView& view);
  // How requests fare on the serving set at a rate: it cuts batches of B, and of up to
  // backlog_batch where rows queue, so its latency is at most either plan's (simulated at B
  // alone, a rate near B's capacity would queue without bound and make any move look worth
  // it). Batch models only; Simulate() takes about a millisecond a plan.
  class ServingSimulation {
   public:
    ServingSimulation(const Autoscaler& autoscaler, const ServingView& view);
    // The lower mean and the lower p99 of the serving plans at `rate` rows/s.
    BatchingSimulator::Result At(double rate) const;

   private:
    const PlanEvaluator eval_;
    std::vector<Plan> plans_;
  };
  // Whether serving `plan` after `view` starts runtimes (see AutoscalerOptions).
  bool StartsRuntimes(const Plan& plan, const ServingView& view) const;
  bool RateMoveHeld(const PolicyState& state, SteadyTime now) const;
  // Whether a plan running `capacity` rows/s in place of one running `instead` gives up
  // capacity held in reserve: it runs less than min_capacity, and less than the other.
  bool GivesUpReserve(double capacity, double instead) const;
  // Rule 3's weighing (see the class comment): whether moving from the serving plan, `capacity`
  // rows/s, to `fresh` beside its busy runtimes repays the queue that builds while fresh
  // starts, at `rate` rows/s as measured over `window_s`, without breaking a p99 target the
  // serving plan meets. `why` receives the figures.
  bool SwitchRepays(const ServingView& view, const Plan& fresh, double rate, double capacity,
                    double window_s, std::string* why) const;
  // Rule 3: turns d's move (of rule 2) into a kNoHandover hold where it applies.
  void HoldMoveWithoutHandover(const Inputs& in, Decision* d) const;
  // The recent peak a move that gives up capacity must allow for (PeakAllows, rules 2a and 2b):
  // the arrivals' peak over stretches of `ms` within the last scale_down_delay_ms (or the
  // estimator's window, if longer); judged over PeakWindowMs (the overload window, or the
  // estimator's window without one).
  RateOverFn RecentPeak(const Inputs& in) const;
  // The span a step down's recent peak is taken over: scale_down_delay_ms (the estimator's
  // window where longer).
  std::chrono::milliseconds PeakSpan(const Inputs& in) const;
  // Whether a plan of less capacity must wait: an overload move was carried out less than
  // scale_down_delay_ms ago, or the arrivals have been counted (since the model's start, a
  // management change or an overload move, which restart them) for less than PeakSpan(): the
  // peak that plan must absorb is not known yet; nor is it while the arrivals still rise
  // (ArrivalsRising). WhyPeakUnknown says which, the first that holds in the order below.
  enum class PeakUnknown { kArrivalsYoung, kOverloadMove, kArrivalsRising };
  std::optional<PeakUnknown> WhyPeakUnknown(const Inputs& in) const;
  bool WithinScaleDownDelay(const Inputs& in) const;
  // Whether the rows/s arriving over the estimator's window exceed, by more than kOverloadSigmas
  // Poisson standard deviations of the window's count, every level they reached over a window
  // earlier within PeakSpan() (their mean over it where it holds no earlier window): a load
  // still on its way up, whose peak lies ahead. A burst back to a level already seen within the
  // span (on-off load) is not a rise: that peak is known.
  bool ArrivalsRising(const Inputs& in) const;
  // Whether the serving plan's requests' simulated p99 at the rate arriving meets
  // batching.p99_target_ms (false without a target or a known rate, and for decoders): a plan
  // of less capacity is then not taken for a lower p99, which the target does not ask for,
  // and it would meet the next rise with less.
  bool ServingMeetsTarget(const Inputs& in) const;
  int64_t PeakWindowMs(const Inputs& in) const;
  // Sets d's hold to `r` unless a rule before held (see RuleFn).
  static void Hold(Reason r, Decision* d);

  // The rules (see the class comment). Each returns true where it decided (moved or held for
  // good); *d holds the move or hold.
  bool RelieveOverload(const Inputs& in, Decision* d) const;
  // Rule 1's rate: the arrivals over overload_window_ms (or twice or four times it) where they
  // exceed `serving` rows/s, or else max_utilization of it (*busy_only); nullopt where neither.
  std::optional<double> OverloadRate(const ArrivalRate& arrivals, double serving,
                                     bool* busy_only) const;
  // Rule 1's move in words, from its reason's figures.
  std::string OverloadText(const Reason& r, const Plan& target) const;
  bool FollowEstimate(const Inputs& in, Decision* d) const;
  // FollowEstimate's two directions: the B to move to from the estimator's `decision`, or
  // nullopt where B stays (step->reason then says why). `step->capped` notes a step that stops
  // short of the estimate.
  struct Step {
    Reason reason;
    std::string capped;
    std::optional<PlanChoice> plan;  // the plan for the B stepped to, where not PlanFor's
  };
  std::optional<int64_t> StepUp(const Inputs& in, Step* step) const;
  std::optional<int64_t> StepDown(const Inputs& in, Step* step) const;
  // The step down's candidates for one decision (autoscaler_step_down.cc).
  class StepDownTable;
  // Why no plan of as much capacity was stepped down to: those that give up some, and the
  // simulated p99s of the others.
  std::string KeepingCapacityText(const StepDownTable& table) const;
  // Why StepDown holds (*r): the peak a step giving up capacity must meet is not known yet
  // (kScaleDownDelay), or the serving plan meets the p99 target (kWithinTarget).
  void ExplainPeakUnknown(PeakUnknown why, const Inputs& in, const StepDownTable& table,
                          Reason* r) const;
  void ExplainWithinTarget(const Inputs& in, const StepDownTable& table, Reason* r) const;
  // The step StepDown takes to `b`: the plan it names (for a burst, or keeping capacity) and
  // what it says about it (step->capped, the reason's target figures).
  void DescribeStepDown(const Inputs& in, const StepDownTable& table, int64_t b, bool for_burst,
                        bool keeping_capacity, Step* step) const;
  // Why no step down passed (*r: kBurstReserve, kServingP99Lowest, kMinCapacity or
  // kPeakGuard), from what the search found.
  void ExplainStepDownHold(const StepDownTable& table, const ServingView& view, int64_t decision,
                           std::optional<double> arriving, bool for_burst,
                           std::chrono::milliseconds peak_window, Reason* r) const;
  bool ReplanAtRate(const Inputs& in, Decision* d) const;

  AutoscalerOptions options_;  // threads changes with the node partition (set_threads)
  const Optimizer* const optimizer_;
  const BatchingSimulator simulator_;  // its arrivals are drawn once; Run is const
  PolicyState state_;                  // for the stateful Decide, Applied and Reset
};

}  // namespace packrat
