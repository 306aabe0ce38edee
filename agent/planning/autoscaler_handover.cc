// The Autoscaler's moves that start runtimes beside a busy serving set: staged hand-overs of
// CPUs (migration.h), plans that keep the serving runtimes, and rule 3 — holding a move without
// a hand-over, or weighing its start against its gain (autoscaler.h, "The rules").
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/planning/autoscaler.h"
#include "agent/planning/batch_for_rate.h"
#include "agent/planning/migration.h"
#include "agent/planning/poisson_noise.h"

namespace packrat {
namespace {

// Rule 2's moves, the ones rule 3 weighs: rules 0 and 1 are never held.
bool IsRuleTwo(Rule rule) {
  return rule == Rule::kEstimatorStepUp || rule == Rule::kEstimatorStepDown ||
         rule == Rule::kReplanAtRate;
}

}  // namespace

std::optional<Autoscaler::OnInstances> Autoscaler::PlanOnInstances(
    const std::vector<int>& instances, int64_t batch, std::optional<double> rate,
    const SlowdownFn& slowdown, double need, int64_t largest_batch) const {
  if (optimizer_ == nullptr || instances.empty()) return std::nullopt;
  const int64_t largest = largest_batch > 0 ? largest_batch : options_.max_batch;
  const PlanEvaluator eval(*optimizer_, simulator_, options_.evaluation, slowdown);
  const bool at_rate = rate.has_value() && *rate > 0;
  const int64_t n = static_cast<int64_t>(instances.size());
  // Other B only at a rate: at full batches a smaller B always looks faster. There, every
  // power-of-two multiple of the instance count up to max_batch (more rows a batch, more
  // capacity).
  std::set<int64_t> batches = {batch};
  if (at_rate) {
    for (int64_t b = n; b < 2 * largest; b *= 2) batches.insert(std::min<int64_t>(b, largest));
  }
  std::optional<OnInstances> best;
  bool best_overloaded = false;
  for (int64_t b : batches) {
    StatusOr<Plan> plan = optimizer_->SolveOnInstances(instances, static_cast<int>(b));
    if (!plan.ok()) continue;
    const double capacity = eval.Capacity(*plan);
    if (capacity < need) continue;
    double ms = eval.PredictedLatencyMs(*plan);
    double batch_ms = ms;
    if (at_rate) {
      const BatchingSimulator::Result simulated = eval.Simulate(*plan, *rate);
      ms = simulated.p99_ms;
      batch_ms = simulated.mean_batch_ms;
    }
    if (eval.TooSlow(batch_ms)) continue;
    // Where a plan cannot serve the rate its queue grows for as long as the simulation runs:
    // such a p99 does not compare, capacity does.
    const bool overloaded = at_rate && *rate >= capacity;
    const bool better =
        !best || (overloaded != best_overloaded
                      ? !overloaded
                      : (overloaded ? capacity > best->capacity : ms < best->p99_ms));
    if (!better) continue;
    plan->threads_total = options_.threads;
    best = OnInstances{std::move(plan).value(), ms, capacity};
    best_overloaded = overloaded;
  }
  return best;
}

double Autoscaler::NeededCapacity(const Plan& fresh, std::optional<double> rate,
                                  const SlowdownFn& slowdown) const {
  const PlanEvaluator eval(*optimizer_, simulator_, options_.evaluation, slowdown);
  double need = eval.Capacity(fresh);
  if (rate && *rate > 0) need = std::min(need, *rate / options_.max_utilization);
  return need;
}

std::optional<Plan> Autoscaler::KeepingPlan(const std::vector<int>& keepable, const Plan& fresh,
                                            std::optional<double> rate, const SlowdownFn& slowdown,
                                            double margin, int budget) const {
  if (optimizer_ == nullptr || !options_.resizable_runtimes || options_.generative) {
    return std::nullopt;
  }
  const int threads = budget > 0 ? budget : options_.threads;
  // The serving runtimes that fit the budget, in serving order.
  std::vector<int> kept;
  int used = 0;
  for (int t : keepable) {
    if (used + t > threads) continue;
    kept.push_back(t);
    used += t;
  }
  if (kept.empty()) return std::nullopt;
  const int spare = threads - used;
  // Thread counts for the runtimes on the spare CPUs: each one kept or fresh runs.
  std::set<int> fills(kept.begin(), kept.end());
  for (const InstanceGroup& g : fresh.groups) fills.insert(g.threads);

  const PlanEvaluator eval(*optimizer_, simulator_, options_.evaluation, slowdown);
  const double fresh_ms =
      rate && *rate > 0 ? eval.SimulatedP99Ms(fresh, *rate) : eval.PredictedLatencyMs(fresh);
  // Where fresh cannot serve the rate with max_utilization to spare, p99s at the rate are of
  // queues that grow: there the margin is on capacity (at least fresh's / (1 + margin)).
  const bool overloaded =
      rate && *rate > 0 && *rate >= options_.max_utilization * eval.Capacity(fresh);
  // Capacity short of the rate is never traded for time: at most kKeepCapacityMargin less.
  const double need = NeededCapacity(fresh, rate, slowdown) /
                      (overloaded ? 1 + std::min(margin, kKeepCapacityMargin) : 1);
  const double bar = overloaded ? std::numeric_limits<double>::infinity() : (1 + margin) * fresh_ms;
  // A shrink that starts nothing switches at once: the kept runtimes alone, where they do.
  if (spare > 0) {
    std::optional<OnInstances> alone = PlanOnInstances(kept, fresh.batch, rate, slowdown, need);
    if (alone && alone->p99_ms <= bar) return std::move(alone->plan);
  }
  std::optional<OnInstances> best;
  for (int fill : fills) {
    std::vector<int> instances = kept;
    for (int k = 0; k < spare / fill; ++k) instances.push_back(fill);
    if (spare % fill > 0) instances.push_back(spare % fill);
    std::optional<OnInstances> on = PlanOnInstances(instances, fresh.batch, rate, slowdown, need);
    if (on && (!best || (overloaded ? on->capacity > best->capacity : on->p99_ms < best->p99_ms))) {
      best = std::move(on);
    }
  }
  if (!best || best->p99_ms > bar) return std::nullopt;
  return std::move(best->plan);
}

void Autoscaler::HoldMoveWithoutHandover(const Inputs& in, Decision* d) const {
  const ServingView& view = in.view;
  const std::optional<double>& arriving = in.arriving;
  if (!d->move || !IsRuleTwo(d->move->reason.rule) || !arriving || *arriving <= 0 ||
      !options_.resizable_runtimes || options_.generative || !StartsRuntimes(d->move->plan, view)) {
    return;
  }
  const double capacity = ServingCapacity(view);
  // At most half busy, the serving set keeps up at the half speed it runs at beside the new
  // runtimes' threads. Beyond its capacity rows pile up, and the overload rule (never held)
  // moves.
  if (capacity <= 0 || *arriving <= kHandoverUtilization * capacity) return;
  if (HandsOver(ThreadCounts(view.groups), d->move->plan, arriving, view.slowdown, view.batch)) {
    return;
  }
  std::string weighed;
  const double window_s =
      static_cast<double>(std::max<int64_t>(1, options_.window - 1) * options_.sample_period_ms) /
      1e3;
  if (SwitchRepays(view, d->move->plan, *arriving, capacity, window_s, &weighed)) {
    d->move->reason.text += " (beside the busy runtimes: " + weighed + ")";
    return;
  }
  Reason r = std::move(d->move->reason);
  d->move.reset();
  r.rule = Rule::kNoHandover;
  r.rate = arriving;
  r.serving_capacity = capacity;
  r.quiet = true;  // recurs at each decision while the load stays
  std::ostringstream text;
  text << std::fixed << std::setprecision(0) << "held: " << r.text << " would start runtimes beside"
       << " the busy ones (no hand-over of CPUs) at " << 100 * *arriving / capacity
       << "% of the serving plan's " << capacity << " rows/s";
  if (!weighed.empty()) text << ": " << weighed;
  r.text = text.str();
  d->hold = std::move(r);
}

Autoscaler::ServingSimulation::ServingSimulation(const Autoscaler& autoscaler,
                                                 const ServingView& view)
    : eval_(autoscaler.Evaluator(view)) {
  plans_.push_back(ServingPlan(view));
  if (view.backlog_batch > view.batch) {
    if (auto backlog = autoscaler.optimizer_->SolveOnInstances(
            ThreadCounts(view.groups), static_cast<int>(view.backlog_batch));
        backlog.ok()) {
      plans_.push_back(std::move(backlog).value());
    }
  }
}

BatchingSimulator::Result Autoscaler::ServingSimulation::At(double rate) const {
  BatchingSimulator::Result best = eval_.Simulate(plans_[0], rate);
  for (size_t i = 1; i < plans_.size(); ++i) {
    const BatchingSimulator::Result r = eval_.Simulate(plans_[i], rate);
    best.mean_ms = std::min(best.mean_ms, r.mean_ms);
    best.p99_ms = std::min(best.p99_ms, r.p99_ms);
  }
  return best;
}

bool Autoscaler::SwitchRepays(const ServingView& view, const Plan& fresh, double rate,
                              double capacity, double window_s, std::string* why) const {
  // An idle start shares its CPUs with nothing; one beside the busy set at kSharedCpuSpeed.
  const double start_s = std::max(view.first_start_s / kSharedCpuSpeed, view.last_start_s);
  if (start_s <= 0) return false;  // the cost is unknown
  const PlanEvaluator eval = Evaluator(view);
  const double drain = eval.Capacity(fresh) - rate;  // rows/s the new plan works off
  std::ostringstream text;
  text << std::fixed << std::setprecision(1);
  if (drain <= 0) {
    text << "the new plan would not keep up either";
    *why = text.str();
    return false;
  }
  // The gain is judged at the rate less two Poisson standard deviations of its count over the
  // window it was measured on: near the serving capacity a few rows/s decide whether the
  // serving plan queues without bound, and a burst must not buy a switch.
  const double low = PoissonRateFloor(rate, window_s, kOverloadSigmas);
  if (low <= 0) {
    text << "the rate is too uncertain to judge a gain";
    *why = text.str();
    return false;
  }
  // Rows queued while both sets share the CPUs for start_s, then worked off: a triangle of
  // queue over time, in row-seconds of waiting.
  const double queued = std::max(0.0, rate - kSharedCpuSpeed * capacity) * start_s;
  const double cost = 0.5 * queued * (start_s + queued / drain);
  const ServingSimulation serving(*this, view);
  // Do no harm to a p99 target the serving plan meets: through the start its batches take
  // twice as long (kSharedCpuSpeed), and the rows queued by its end wait for fresh to serve
  // them: a mean gain does not pay for a p99 that breaks the target meanwhile.
  if (options_.p99_target_ms > 0) {
    const double serving_p99 = serving.At(rate).p99_ms;
    const double through_start_ms =
        serving_p99 / kSharedCpuSpeed + 1e3 * queued / eval.Capacity(fresh);
    if (serving_p99 <= options_.p99_target_ms && through_start_ms > options_.p99_target_ms) {
      text << "a " << start_s << "-s start queues " << queued
           << " row(s) and would answer in about " << through_start_ms
           << " ms, beyond the p99 target of " << options_.p99_target_ms
           << " ms that the serving plan meets (" << serving_p99 << " ms)";
      *why = text.str();
      return false;
    }
  }
  const double serving_ms = serving.At(low).mean_ms;
  const double saved_ms = serving_ms - eval.Simulate(fresh, low).mean_ms;
  const double horizon_s = static_cast<double>(options_.scale_down_delay_ms) / 1e3;
  const double gain = low * horizon_s * saved_ms / 1e3;
  text << "a " << start_s << "-s start queues " << queued << " row(s), " << cost
       << " row-s of waiting, against " << gain << " row-s saved over " << horizon_s << " s (mean "
       << serving_ms << " -> " << serving_ms - saved_ms << " ms)";
  *why = text.str();
  return gain > cost;
}

StageEstimator Autoscaler::StageEstimates(const Plan& fresh, std::optional<double> rate,
                                          SlowdownFn slowdown, int64_t serving_batch) const {
  return [this, batch = fresh.batch, largest = std::max<int64_t>(fresh.batch, serving_batch), rate,
          slowdown = std::move(slowdown)](const std::vector<int>& instances) {
    const std::optional<OnInstances> on =
        PlanOnInstances(instances, batch, rate, slowdown, 0, largest);
    return on ? StageEstimate{on->capacity, on->p99_ms, rate && *rate >= on->capacity}
              : StageEstimate{0, std::numeric_limits<double>::infinity(), false};
  };
}

bool Autoscaler::HandsOver(const std::vector<int>& serving, const Plan& fresh,
                           std::optional<double> rate, const SlowdownFn& slowdown,
                           int64_t serving_batch) const {
  const std::vector<int> target = ThreadCounts(fresh.groups);
  const double need = NeededCapacity(fresh, rate, slowdown);
  const StageEstimator estimate = StageEstimates(fresh, rate, slowdown, serving_batch);
  const double p99_bound_ms = StageP99BoundMs(estimate, serving, target);
  std::vector<int> now = serving;
  for (int stage = 1; stage <= kMaxHandoverStages + 1; ++stage) {
    int used = 0;
    for (int t : now) used += t;
    const std::optional<MigrationStep> step = NextMigrationStep(
        now, std::max(0, options_.threads - used), target, estimate, need, p99_bound_ms);
    if (!step) return false;
    if (step->final) return true;
    now = step->instances;
  }
  return false;
}

}  // namespace packrat
