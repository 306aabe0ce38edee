#include "agent/planning/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include "agent/planning/batch_for_rate.h"
#include "agent/planning/loaded_latency.h"

namespace packrat {

std::string Autoscaler::CapacityText(const std::optional<double>& rows_per_s) {
  if (!rows_per_s) return "no plan within the batch-latency limit";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << *rows_per_s << " rows/s";
  return out.str();
}

std::string Autoscaler::PassedOverNote(const Plan& taken, const std::optional<Plan>& passed_over,
                                       double margin, bool generative) {
  if (!passed_over) return "";
  std::ostringstream note;
  note.precision(3);
  note << "; " << taken.ConfigString() << " on the serving runtimes (" << taken.latency_ms
       << " ms profiled): " << passed_over->ConfigString() << " (" << passed_over->latency_ms
       << " ms) would "
       << (generative ? "change decoders (their sequences finish beside the new ones) for steps"
                      : "start runtimes for batches")
       << " at most " << margin * 100 << "% faster";
  return note.str();
}

std::string_view RuleName(Rule rule) {
  // In the order of the enum's members.
  // clang-format off
  static constexpr std::string_view kNames[] = {
      "behind",           "overload",         "estimator_step_up", "estimator_step_down",
      "replan_at_rate",   "backlog_draining",  "backlog_drained",    "step_up_gains_too_little",
      "scale_down_delay", "peak_guard",        "serving_p99_lowest", "min_capacity",
      "burst_reserve",    "no_plan",           "idle_decode_slots",
      "within_restart_margin",                 "behind_at_most_capacity",
      "within_target",    "no_handover"};
  // clang-format on
  static_assert(std::size(kNames) == static_cast<size_t>(Rule::kNoHandover) + 1);
  const auto i = static_cast<size_t>(rule);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool IsMove(Rule rule) {
  switch (rule) {
    case Rule::kBehind:
    case Rule::kOverload:
    case Rule::kEstimatorStepUp:
    case Rule::kEstimatorStepDown:
    case Rule::kReplanAtRate:
      return true;
    default:
      return false;
  }
}

Autoscaler::Autoscaler(AutoscalerOptions options, const Optimizer* optimizer)
    : options_(std::move(options)), optimizer_(optimizer) {}

void Autoscaler::Reset() {
  state_.last_overload_move.reset();
  state_.behind_since.reset();
  state_.backlog = false;
}

PlanEvaluator Autoscaler::Evaluator(const ServingView& view) const {
  return PlanEvaluator(*optimizer_, simulator_, options_.evaluation, view.slowdown);
}

PlanEvaluator Autoscaler::CautiousEvaluator(const ServingView& view) const {
  const auto slowdown = [&view](int threads) {
    return view.slowdown ? view.slowdown(threads) : 1.0;
  };
  std::optional<double> least;  // of the thread counts measured
  if (view.measured) {
    for (int t = 1; t <= options_.threads; ++t) {
      if (view.measured(t)) least = std::min(least.value_or(slowdown(t)), slowdown(t));
    }
  }
  if (!least) return Evaluator(view);
  const double prior = std::max(1.0, *least);
  SlowdownFn cautious = [measured = view.measured, slowdown, prior](int threads) {
    return std::max(1.0,
                    measured(threads) ? slowdown(threads) : std::max(prior, slowdown(threads)));
  };
  return PlanEvaluator(*optimizer_, simulator_, options_.evaluation, std::move(cautious));
}

double Autoscaler::CapacityToKeep(const Plan& plan, const PlanEvaluator& eval) const {
  if (options_.p99_target_ms <= 0 || options_.generative) return eval.Capacity(plan);
  return eval.MaxRate(plan.groups, plan.batch, options_.p99_target_ms)
      .value_or(eval.Capacity(plan));
}

bool Autoscaler::KeepsLess(const Plan& plan, double to_keep, const PlanEvaluator& eval) const {
  return eval.Capacity(plan) < to_keep || CapacityToKeep(plan, eval) < to_keep;
}

bool Autoscaler::GivesUpCapacity(const Plan& plan, const ServingView& view) const {
  const PlanEvaluator cautious = CautiousEvaluator(view);
  return KeepsLess(plan, CapacityToKeep(ServingPlan(view), cautious), cautious);
}

Plan Autoscaler::ServingPlan(const ServingView& view) {
  Plan serving;
  serving.batch = static_cast<int>(view.batch);
  serving.groups = view.groups;
  serving.latency_ms = view.plan_latency_ms;  // for groups the profile lacks
  return serving;
}

bool Autoscaler::StartsRuntimes(const Plan& plan, const ServingView& view) const {
  if (!options_.resizable_runtimes) return true;
  const std::vector<int> needed = ThreadCounts(plan.groups);
  std::vector<int> available = ThreadCounts(view.groups);
  available.insert(available.end(), view.parked_threads.begin(), view.parked_threads.end());
  std::sort(available.begin(), available.end());
  return !std::includes(available.begin(), available.end(), needed.begin(), needed.end());
}

bool Autoscaler::GivesUpReserve(double capacity, double instead) const {
  return capacity < options_.min_capacity && capacity < instead;
}

bool Autoscaler::RateMoveHeld(const PolicyState& state, SteadyTime now) const {
  return state.last_rate_move &&
         now - *state.last_rate_move < std::chrono::milliseconds(options_.scale_down_delay_ms);
}

std::optional<Autoscaler::PlanChoice> Autoscaler::PlanFor(int64_t b, const ServingView& view,
                                                          std::optional<double> rate, bool bounded,
                                                          double floor) const {
  if (optimizer_ == nullptr) return std::nullopt;
  const PlanEvaluator eval = Evaluator(view);
  auto best = optimizer_->Solve(options_.threads, static_cast<int>(b));
  if (!best.ok()) return std::nullopt;
  PlanChoice choice{std::move(best).value(), 0, std::nullopt, std::nullopt};
  // A batch model's plans are compared at the batches the rate cuts, where it is known.
  const bool at_rate = rate.has_value() && !options_.generative;
  const auto slowdown = [&](int t) { return eval.Slowdown(t); };
  // The optimizer ranks plans on the profile: at measured slowdowns that differ by thread
  // count, another plan for b may serve more rows (full batches, or a rate no plan serves
  // max_utilization busy).
  const auto most_capacity = [&] {
    if (auto more = MoreCapacity(*optimizer_, options_.threads, static_cast<int>(b), choice.plan,
                                 kBatchForRateMinGain, slowdown)) {
      choice.plan = *std::move(more);
    }
  };
  if (at_rate) {
    // Among the plans that would run min_capacity at most max_utilization busy, where they do.
    const double bar = std::max({*rate, options_.min_capacity * options_.max_utilization,
                                 floor * options_.max_utilization});
    if (auto faster = FasterAtRate(*optimizer_, options_.threads, static_cast<int>(b), choice.plan,
                                   bar, options_.max_utilization, slowdown, [&](const Plan& plan) {
                                     return eval.SimulatedP99Ms(plan, *rate);
                                   })) {
      choice.plan = *std::move(faster);
    } else if (*rate > options_.max_utilization * eval.Capacity(choice.plan)) {
      most_capacity();
    }
    choice.simulated = eval.Simulate(choice.plan, *rate);
  } else if (!options_.generative) {
    most_capacity();
  }
  const double latency = at_rate ? choice.simulated->p99_ms : eval.PredictedLatencyMs(choice.plan);
  const std::vector<int> running = ThreadCounts(view.groups);
  // A plan that starts runtimes costs their start beside the serving set; for a decoder any
  // other thread counts cost as much, parked decoders included: the sequences decoding stay
  // on the old decoders to their end, beside the new ones on the same CPUs.
  const bool costly = options_.generative ? ThreadCounts(choice.plan.groups) != running
                                          : StartsRuntimes(choice.plan, view);
  if (options_.resizable_runtimes && !running.empty() && costly) {
    // The serving runtimes can run any b up to max_batch.
    auto kept = optimizer_->SolveOnInstances(running, static_cast<int>(b));
    if (kept.ok()) {
      std::optional<BatchingSimulator::Result> kept_simulated;
      if (at_rate) kept_simulated = eval.Simulate(*kept, *rate);
      const double kept_latency = at_rate ? kept_simulated->p99_ms : eval.PredictedLatencyMs(*kept);
      if (kept_latency <= (1 + options_.restart_margin) * latency &&
          !GivesUpReserve(eval.Capacity(*kept), eval.Capacity(choice.plan)) &&
          eval.Capacity(*kept) >= floor) {
        choice.passed_over = std::move(choice.plan);
        choice.plan = std::move(kept).value();
        choice.simulated = kept_simulated;
      }
    }
  }
  // At a rate, the batches it cuts: simulated for a batch model; for a decoder the slots the
  // rate fills (LoadedLatencyMs).
  const double batch_ms = at_rate ? choice.simulated->mean_batch_ms
                          : rate  ? LoadedLatencyMs(choice.plan, optimizer_->profile(), *rate,
                                                    [&](int t) { return eval.Slowdown(t); })
                                  : eval.PredictedLatencyMs(choice.plan);
  if (bounded && eval.TooSlow(batch_ms)) return std::nullopt;
  choice.capacity = eval.Capacity(choice.plan);
  return choice;
}

const std::optional<Autoscaler::PlanChoice>& Autoscaler::Candidates::At(int64_t b) const {
  auto it = plans_.find(b);
  if (it == plans_.end()) it = plans_.emplace(b, policy_.PlanFor(b, view_, rate_, bounded_)).first;
  return it->second;
}

std::optional<double> Autoscaler::Candidates::Capacity(int64_t b) const {
  const std::optional<PlanChoice>& planned = At(b);
  return planned ? std::optional<double>(planned->capacity) : std::nullopt;
}

std::optional<double> Autoscaler::Candidates::Burst(int64_t b) const {
  const std::optional<PlanChoice>& planned = At(b);
  return planned ? std::optional<double>(policy_.BurstCapacity(planned->plan, view_))
                 : std::nullopt;
}

std::optional<double> Autoscaler::Candidates::P99(int64_t b) const {
  const std::optional<PlanChoice>& planned = At(b);
  if (!planned || !planned->simulated) return std::nullopt;
  return planned->simulated->p99_ms;
}

int64_t Autoscaler::BacklogRows(const std::vector<InstanceGroup>& groups, int64_t target,
                                const SlowdownFn& slowdown) const {
  if (!options_.resizable_runtimes || options_.generative || optimizer_ == nullptr) return 0;
  const PlanEvaluator eval(*optimizer_, simulator_, options_.evaluation, slowdown);
  const std::vector<int> threads = ThreadCounts(groups);
  return BacklogBatch(target, options_.max_batch,
                      [&](int64_t b) { return eval.CapacityOn(threads, b); });
}

double Autoscaler::ServingCapacity(const ServingView& view) const {
  const PlanEvaluator eval = Evaluator(view);
  double capacity = eval.Capacity(ServingPlan(view));
  if (view.backlog_batch > view.batch) {
    capacity = std::max(capacity,
                        eval.CapacityOn(ThreadCounts(view.groups), view.backlog_batch).value_or(0));
  }
  return capacity;
}

double Autoscaler::BurstCapacity(const Plan& plan, const ServingView& view) const {
  const PlanEvaluator eval = Evaluator(view);
  const double capacity = eval.Capacity(plan);
  const int64_t backlog = BacklogRows(plan.groups, plan.batch, view.slowdown);
  if (backlog <= plan.batch) return capacity;
  return std::max(capacity, eval.CapacityOn(ThreadCounts(plan.groups), backlog).value_or(0));
}

Decision Autoscaler::Decide(const ServingView& view, LoadTracker& load, SteadyTime now) {
  Decision d = Decide(view, std::as_const(load), state_, now);
  state_ = d.next;
  if (d.restart_estimator) load.estimator().Restart();
  if (d.advance_estimator) load.estimator().Decide(now, view.batch);
  return d;
}

void Autoscaler::Applied(const Move& move, bool ok, SteadyTime now, LoadTracker& load) {
  bool restart = false;
  state_ = AfterMove(state_, move, ok, now, &restart);
  if (restart) load.estimator().Restart();
}

const Autoscaler::RuleFn Autoscaler::kRules[] = {
    &Autoscaler::CatchUp,          // 0
    &Autoscaler::RelieveOverload,  // 1
    &Autoscaler::DrainBacklog,     // 1's backlog
    &Autoscaler::AtDecisionPoint,  // 2's gate
    &Autoscaler::FollowEstimate,   // 2a
    &Autoscaler::ReplanAtRate,     // 2b
};
const Autoscaler::VetoFn Autoscaler::kVetoes[] = {
    &Autoscaler::HoldMoveWithoutHandover,  // 3
};

Decision Autoscaler::Decide(const ServingView& view, const LoadTracker& load,
                            const PolicyState& state, SteadyTime now) const {
  const auto window = std::chrono::milliseconds(std::max<int64_t>(1, options_.window - 1) *
                                                options_.sample_period_ms);
  const std::optional<double> arriving = load.arrivals().Over(window);
  const Candidates candidates(*this, view, arriving);
  const Inputs in{view,
                  load,
                  state,
                  now,
                  view.adaptive && optimizer_ != nullptr,
                  window,
                  arriving,
                  load.estimator().Proposed(now, view.batch),
                  candidates};
  Decision d;
  d.next = state;
  for (const RuleFn rule : kRules) {
    if ((this->*rule)(in, &d)) break;
  }
  for (const VetoFn veto : kVetoes) (this->*veto)(in, &d);
  return d;
}

void Autoscaler::Hold(Reason r, Decision* d) {
  if (!d->hold) d->hold = std::move(r);
}

bool Autoscaler::DrainBacklog(const Inputs& in, Decision* d) const {
  if (!in.state.backlog) return false;
  // The rows queued while the old plan fell behind are still draining: the queue depth
  // measures them, not the load, and its mode would move B up for nothing (a B whose
  // batches take seconds). The estimator starts afresh once the queue has drained.
  Reason r;
  r.from_batch = in.view.batch;
  r.ewma = in.load.estimator().ewma();
  if (in.load.rows_in_system() > in.view.batch) {
    // A queue that still stands once the estimator's window, restarted at the move, holds
    // only samples taken since is the load, not a backlog: a bounded client pool refills its
    // queue as fast as it is served, so it never drains. The estimator hears it (rule 2).
    if (in.load.estimator().Smoothed(in.view.batch).has_value()) {
      d->next.backlog = false;
      return false;
    }
    r.rule = Rule::kBacklogDraining;
    r.quiet = true;
    r.text = "an overload move's backlog drains";
    Hold(std::move(r), d);
    return true;
  }
  d->next.backlog = false;
  d->restart_estimator = true;
  r.rule = Rule::kBacklogDrained;
  r.text = "the backlog has drained (" + std::to_string(in.load.rows_in_system()) +
           " row(s) in the system at B=" + std::to_string(in.view.batch) +
           "); the estimator starts afresh";
  Hold(std::move(r), d);
  return true;
}

bool Autoscaler::AtDecisionPoint(const Inputs& in, Decision* d) const {
  const BatchSizeEstimator& estimator = in.load.estimator();
  const std::optional<SteadyTime> due = estimator.next_decision_time();
  d->advance_estimator = due && in.now >= *due;
  const bool at_grid = d->advance_estimator && estimator.Smoothed(in.view.batch).has_value();
  return !at_grid || !in.acting;
}

PolicyState Autoscaler::AfterMove(PolicyState state, const Move& move, bool ok, SteadyTime now,
                                  bool* restart_estimator) {
  *restart_estimator = false;
  if (ok) {
    state.last_applied = now;
    state.behind_since.reset();
  }
  switch (move.reason.rule) {
    case Rule::kBehind:
    case Rule::kOverload:
      if (!ok) return state;
      // What the estimator saw while the old plan fell behind (a backlog) says nothing about
      // the new one.
      state.last_overload_move = now;
      state.backlog = true;
      *restart_estimator = true;
      return state;
    case Rule::kReplanAtRate:
      state.last_rate_move = move.decided_at;  // tried: the next waits, whatever the outcome
      return state;
    default:
      return state;
  }
}

bool Autoscaler::RelieveOverload(const Inputs& in, Decision* d) const {
  if (!in.acting || options_.generative) return false;
  const ServingView& view = in.view;
  const LoadTracker& load = in.load;
  const SteadyTime now = in.now;
  const int64_t window_ms = options_.overload_window_ms;
  if (window_ms <= 0) return false;
  const int64_t current = view.batch;
  const BatchSizeEstimator& estimator = load.estimator();
  // Rows must be piling up beyond one batch: a rate that only looks high over a short window
  // (arrivals are random) while the plan keeps up changes nothing.
  if (estimator.ewma() <= static_cast<double>(current) || load.rows_in_system() <= current) {
    return false;
  }
  // While rows queue, the serving set cuts batches of up to backlog_batch (BacklogBatch): that
  // is what it serves under load, and what a move must beat.
  const int64_t backlog_b = std::max(current, view.backlog_batch);
  const double serving = ServingCapacity(view);
  if (serving <= 0) return false;
  bool busy_only = false;  // above max_utilization, not above capacity
  const std::optional<double> rate = OverloadRate(load.arrivals(), serving, &busy_only);
  if (!rate) return false;  // it keeps up, if barely: the estimator's call
  // Plans are judged at the rate, over every B: capacity is no monotone function of B once
  // plans differ in shape and thread counts in measured slowdown. Among the plans that serve
  // kBatchForRateMinGain more than the serving set, of those that keep up the one of the
  // lowest simulated p99 at the rate; else the smallest near the most capacity, where that
  // serves kBatchForRateMinGain more.
  const Candidates at_rate(*this, view, rate);
  const std::optional<int64_t> b = OverloadBatch(
      *rate, static_cast<double>(window_ms) / 1e3, options_.max_batch,
      kBatchForRateMinGain * serving, [&at_rate](int64_t b) { return at_rate.Capacity(b); },
      [&at_rate](int64_t b) { return at_rate.P99(b); });
  // Nothing serves more: the queue bounds what waits (429 beyond it).
  if (!b || at_rate.At(*b)->plan.groups == view.groups) return false;
  const PlanChoice& target = *at_rate.At(*b);
  // Busy, not behind: capacity to spare is worth a move only where the requests fare better
  // for it. A plan of more capacity cuts larger batches, each longer: at 0.8 busy the serving
  // set's queue may cost less than they do, which the simulated p99s at the rate compare.
  if (busy_only && target.simulated &&
      ServingSimulation(*this, view).At(*rate).p99_ms <= target.simulated->p99_ms) {
    return false;
  }
  // Busy, not behind: a move that starts runtimes only where none starts beside the busy ones
  // (a staged hand-over), and only to thread counts already measured: the set keeps up, and a
  // shape not served yet counts at its profile, so the gain would be on paper only (rule 3
  // weighs no such move).
  if (busy_only && StartsRuntimes(target.plan, view) &&
      (!HandsOver(ThreadCounts(view.groups), target.plan, rate, view.slowdown, view.batch) ||
       !std::all_of(target.plan.groups.begin(), target.plan.groups.end(),
                    [&view](const InstanceGroup& g) {
                      return view.measured && view.measured(g.threads);
                    }))) {
    return false;
  }
  Reason r;
  r.rule = Rule::kOverload;
  r.from_batch = current;
  r.to_batch = *b;
  r.ewma = estimator.ewma();
  r.rate = *rate;
  r.serving_capacity = serving;
  r.target_capacity = target.capacity;
  r.backlog_batch = backlog_b > current ? backlog_b : 0;
  r.busy_only = busy_only;
  r.passed_over = target.passed_over;
  r.text = OverloadText(r, target.plan);
  d->move = Move{target.plan, std::move(r), now};
  d->restart_arrivals = true;  // either way the next try waits for a new window
  return true;
}

std::optional<double> Autoscaler::OverloadRate(const ArrivalRate& arrivals, double serving,
                                               bool* busy_only) const {
  // The arrivals over the window, and over twice and four times it (a smaller excess takes
  // longer to tell from chance), against what the set serves fully busy: a burst the set rides
  // out must not cost a switch that starts runtimes, which on busy CPUs queues more than the
  // burst did. A move that starts none (a change of b, or parked runtimes) costs nothing and is
  // taken already when the arrivals exceed max_utilization of it: a set run that busy builds a
  // queue in every burst.
  const RateOverFn rate_over = [&arrivals](int64_t ms) {
    return arrivals.Over(std::chrono::milliseconds(ms));
  };
  const int64_t window_ms = options_.overload_window_ms;
  std::optional<double> rate = OverloadedRate(window_ms, serving, rate_over);
  *busy_only = !rate;
  if (*busy_only && options_.max_utilization < 1) {
    rate = OverloadedRate(window_ms, options_.max_utilization * serving, rate_over);
  }
  return rate;
}

std::string Autoscaler::OverloadText(const Reason& r, const Plan& target) const {
  std::ostringstream text;
  text.precision(3);
  text << "overloaded: " << r.rate.value_or(0)
       << " rows/s arriving, the plan for B=" << r.from_batch << " serves "
       << r.serving_capacity.value_or(0);
  if (r.backlog_batch > 0) text << " in batches of up to " << r.backlog_batch;
  if (r.busy_only) {
    text << " (more than " << options_.max_utilization
         << " of it; the move starts no runtime beside the busy ones)";
  }
  text << "; B " << r.from_batch << " -> " << r.to_batch << " serves "
       << r.target_capacity.value_or(0)
       << PassedOverNote(target, r.passed_over, options_.restart_margin, options_.generative);
  return text.str();
}

bool Autoscaler::ReplanAtRate(const Inputs& in, Decision* d) const {
  const ServingView& view = in.view;
  const std::optional<double>& arriving = in.arriving;
  if (!arriving || *arriving <= 0 || options_.generative) return false;
  if (RateMoveHeld(in.state, in.now)) return false;
  const std::optional<PlanChoice>& planned = in.candidates.At(view.batch);
  if (!planned || planned->plan.groups == view.groups) return false;
  // A plan that cannot serve the rate max_utilization busy has the simulated p99 of a queue
  // that grows for as long as the simulation runs: it does not compare. Such a load is rule
  // 1's, whose move may change B.
  if (*arriving > options_.max_utilization * planned->capacity) return false;
  // Nor is capacity that the recent peak needed given up for a lower p99 between bursts: such
  // a move waits, as the step down does, for scale_down_delay_ms after an overload move (whose
  // arrivals were forgotten) and for the recent peak; and, as the step down, it is not taken
  // where the serving plan meets the p99 target. Whether it gives up capacity is judged with
  // no thread count not yet served promising more than the served ones have shown.
  const double serving_capacity = Evaluator(view).Capacity(ServingPlan(view));
  // The guards first: GivesUpCapacity simulates (CapacityToKeep).
  if ((WithinScaleDownDelay(in) || ServingMeetsTarget(in) ||
       !PeakAllows(planned->capacity, serving_capacity, PeakWindowMs(in), options_.max_utilization,
                   RecentPeak(in))) &&
      GivesUpCapacity(planned->plan, view)) {
    return false;
  }
  if (GivesUpReserve(planned->capacity, serving_capacity)) return false;
  const double serving_ms = Evaluator(view).SimulatedP99Ms(ServingPlan(view), *arriving);
  const double next_ms = planned->simulated->p99_ms;
  Reason r;
  r.from_batch = view.batch;
  r.to_batch = view.batch;
  r.rate = *arriving;
  r.serving_p99_ms = serving_ms;
  r.target_p99_ms = next_ms;
  r.target_capacity = planned->capacity;
  if ((1 + options_.restart_margin) * next_ms >= serving_ms) {
    r.rule = Rule::kWithinRestartMargin;
    r.quiet = true;
    r.text = "another plan for B is within the restart margin of the serving one at the rate";
    Hold(std::move(r), d);
    return false;
  }
  if (options_.burst_reserve_ms > 0 && serving_ms <= next_ms + options_.burst_reserve_ms) {
    // Near the lower p99, the serving runtimes may absorb a larger burst (the step down's
    // reserve, StepDownBatch).
    const double serving_burst = ServingCapacity(view);
    const double next_burst = in.candidates.Burst(view.batch).value_or(0);
    if (serving_burst >= kBatchForRateMinGain * next_burst) {
      std::ostringstream text;
      text << "keeping the plan for B=" << view.batch
           << " for a burst: " << std::lround(serving_burst) << " rows/s from a backlog at "
           << std::lround(serving_ms) << " ms, " << planned->plan.ConfigString() << " "
           << std::lround(next_burst) << " at " << std::lround(next_ms)
           << " ms (the burst reserve, 5% of batching.max_batch_latency_ms)";
      r.rule = Rule::kBurstReserve;
      r.quiet = true;
      r.serving_capacity = serving_burst;
      r.text = text.str();
      Hold(std::move(r), d);
      return false;
    }
  }
  std::ostringstream text;
  text.precision(3);
  text << "at " << *arriving << " rows/s, B=" << view.batch << ": a simulated p99 of "
       << std::lround(next_ms) << " ms on this plan, " << std::lround(serving_ms)
       << " ms on the serving one";
  r.rule = Rule::kReplanAtRate;
  r.text = text.str();
  d->move = Move{planned->plan, std::move(r), in.now};
  return true;
}

bool Autoscaler::FollowEstimate(const Inputs& in, Decision* d) const {
  if (!in.estimate) return false;
  const int64_t decision = *in.estimate;
  const ServingView& view = in.view;
  const std::optional<double>& arriving = in.arriving;
  const int64_t current = view.batch;
  Step step;
  step.reason.from_batch = current;
  step.reason.estimate = decision;
  step.reason.ewma = in.load.estimator().ewma();
  step.reason.rate = arriving;
  std::optional<int64_t> b = decision;
  if (decision > current && !options_.generative) {
    // A generative model's idle decode slots cost nothing; a batch model's larger batch costs
    // every row a longer wait, worth it only while it serves more rows per second.
    b = StepUp(in, &step);
  } else if (decision < current) {
    b = StepDown(in, &step);
  }
  Reason& r = step.reason;
  if (!b) {
    Hold(std::move(r), d);
    return false;
  }
  const std::optional<PlanChoice>& planned = step.plan ? step.plan : in.candidates.At(*b);
  r.to_batch = *b;
  if (!planned) {
    r.rule = Rule::kNoPlan;
    r.text = "no plan for B=" + std::to_string(*b);
    Hold(std::move(r), d);
    return false;
  }
  const Plan& plan = planned->plan;
  if (options_.generative && *b < current &&
      ThreadCounts(plan.groups) == ThreadCounts(view.groups)) {
    // A decode step runs the active sequences only (the runtime compacts them into the first
    // slots), so the serving instances run a smaller B as fast as the plan for it would; the
    // switch would only change how sequences are shared between them.
    r.rule = Rule::kIdleDecodeSlots;
    r.text = "keeping B=" + std::to_string(current) + ": the plan for B=" + std::to_string(*b) +
             " has the same thread counts, and idle decode slots cost nothing";
    Hold(std::move(r), d);
    return false;
  }
  r.rule = *b > current ? Rule::kEstimatorStepUp : Rule::kEstimatorStepDown;
  r.target_capacity = planned->capacity;
  r.passed_over = planned->passed_over;
  r.text = "estimator: B " + std::to_string(current) + " -> " + std::to_string(*b) +
           " (load EWMA " + std::to_string(r.ewma) + step.capped + ")" +
           PassedOverNote(plan, planned->passed_over, options_.restart_margin, options_.generative);
  d->move = Move{plan, std::move(r), in.now};
  return true;
}

std::optional<int64_t> Autoscaler::StepUp(const Inputs& in, Step* step) const {
  const int64_t current = in.view.batch;
  const int64_t decision = *in.estimate;
  Reason& r = step->reason;
  const Candidates& candidates = in.candidates;
  const std::optional<int64_t> b =
      StepUpBatch(current, decision,
                  [&](int64_t b) -> std::optional<double> { return candidates.Capacity(b); });
  auto rows_per_s = [&](int64_t b) { return CapacityText(candidates.Capacity(b)); };
  r.serving_capacity = candidates.Capacity(current);
  if (!b) {
    r.rule = Rule::kStepUpGainsTooLittle;
    r.to_batch = decision;
    r.target_capacity = candidates.Capacity(decision);
    r.text = "keeping B=" + std::to_string(current) + " (" + rows_per_s(current) +
             "): up to the estimate B=" + std::to_string(decision) + " no plan serves " +
             std::to_string(std::lround((kBatchForRateMinGain - 1) * 100)) +
             "% more (B=" + std::to_string(decision) + ": " + rows_per_s(decision) + ")";
    return std::nullopt;
  }
  if (*b != decision) {
    step->capped = "; the estimate " + std::to_string(decision) + " would serve " +
                   rows_per_s(decision) + ", " + std::to_string(*b) + " serves " + rows_per_s(*b);
  }
  r.target_capacity = candidates.Capacity(*b);
  return b;
}

}  // namespace packrat
