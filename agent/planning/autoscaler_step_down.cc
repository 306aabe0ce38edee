// The Autoscaler's step down (rule 2a, autoscaler.h): the candidates StepDownBatch weighs,
// kept in one table, and the hold a step that does not go explains.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "agent/planning/autoscaler.h"
#include "agent/planning/batch_for_rate.h"
#include "agent/planning/loaded_latency.h"
#include "agent/planning/poisson_noise.h"

namespace packrat {

// What StepDownBatch asks of each B, answered once and kept: its plan (the decision's
// candidates), the rows/s it serves fully busy, its requests' simulated p99 at the rate, and,
// within the burst reserve, its plan of the most rows/s from a backlog. For the serving B, the
// serving set's own figures: what runs, not a fresh plan for its B. `keeping_capacity`: only
// plans that give up no capacity (GivesUpCapacity) are candidates. Lives for one decision.
class Autoscaler::StepDownTable {
 public:
  StepDownTable(const Autoscaler& policy, const Inputs& in, bool keeping_capacity)
      : policy_(policy),
        view_(in.view),
        arriving_(in.arriving),
        candidates_(in.candidates),
        eval_(policy.Evaluator(in.view)),
        keeping_capacity_(keeping_capacity) {
    if (keeping_capacity_) {
      cautious_.emplace(policy.CautiousEvaluator(in.view));
      serving_to_keep_ = policy.CapacityToKeep(ServingPlan(in.view), *cautious_);
    }
  }

  // StepDownBatch's capacity: nullopt where B has no plan, its plan gives up capacity held
  // in reserve (GivesUpReserve; then below_minimum()), or, keeping capacity, any.
  std::optional<double> Capacity(int64_t b) {
    if (b == view_.batch) {
      return capacities_[b] = serving_capacity_ = eval_.Capacity(ServingPlan(view_));
    }
    // Keeping capacity: B's plan among those that run as much as the serving set.
    const std::optional<PlanChoice>& planned =
        keeping_capacity_
            ? keeping_plans_
                  .emplace(b, policy_.PlanFor(b, view_, arriving_, true, serving_to_keep_))
                  .first->second
            : candidates_.At(b);
    if (!planned) return capacities_[b] = std::nullopt;
    capacities_[b] = planned->capacity;
    if (keeping_capacity_ && GivesUp(planned->plan)) {
      gives_up_[b] = planned->plan;
      return std::nullopt;
    }
    if (policy_.GivesUpReserve(planned->capacity, serving_capacity_)) {
      below_minimum_ = true;
      return std::nullopt;
    }
    if (planned->simulated) p99s_[b] = planned->simulated->p99_ms;
    plans_[b] = planned->plan;
    return planned->capacity;
  }

  // StepDownBatch's p99: nullopt without a known rate, for decoders, or where B has no plan.
  std::optional<double> P99(int64_t b) {
    if (b == view_.batch && at_rate()) {
      p99s_[b] = eval_.SimulatedP99Ms(ServingPlan(view_), *arriving_);
    }
    return p99(b);
  }

  // StepDownBatch's burst reserve: none without a known rate, for decoders, or at
  // burst_reserve_ms 0.
  BurstReserve Reserve() {
    BurstReserve reserve;
    if (!at_rate() || policy_.options_.burst_reserve_ms <= 0) return reserve;
    reserve.slack_ms = policy_.options_.burst_reserve_ms;
    reserve.burst = [this](int64_t b) { return Burst(b); };
    reserve.most_within = [this](int64_t b, double ceiling_ms) {
      return MostWithin(b, ceiling_ms);
    };
    return reserve;
  }

  // What the search found.
  std::optional<double> capacity(int64_t b) const {
    const auto it = capacities_.find(b);
    return it == capacities_.end() ? std::nullopt : it->second;
  }
  std::optional<double> p99(int64_t b) const {
    const auto it = p99s_.find(b);
    return it == p99s_.end() ? std::nullopt : std::optional<double>(it->second);
  }
  const std::map<int64_t, double>& p99s() const { return p99s_; }
  // Keeping capacity: B's plan (Capacity asked for it first).
  const std::optional<PlanChoice>& keeping_plan(int64_t b) const { return keeping_plans_.at(b); }
  // Keeping capacity: the plans passed over because they give up some.
  const std::map<int64_t, Plan>& gives_up() const { return gives_up_; }
  bool below_minimum() const { return below_minimum_; }
  // B's plan for a burst, and the rows/s it serves from a backlog (MostWithin found it).
  const PlanChoice& burst_plan(int64_t b) const { return burst_plans_.at(b); }
  double burst(int64_t b) const { return bursts_.at(b); }
  // Rows/s B's plan (the serving set for the serving B) serves from a backlog.
  std::optional<double> Burst(int64_t b) const {
    if (b == view_.batch) return policy_.ServingCapacity(view_);
    const auto it = plans_.find(b);
    if (it == plans_.end()) return std::nullopt;
    return policy_.BurstCapacity(it->second, view_);
  }

 private:
  bool at_rate() const { return !policy_.options_.generative && arriving_ && *arriving_ > 0; }

  // Keeping capacity: whether `plan` has less CapacityToKeep than the serving set.
  bool GivesUp(const Plan& plan) const {
    return policy_.KeepsLess(plan, serving_to_keep_, *cautious_);
  }

  std::optional<std::pair<double, double>> MostWithin(int64_t b, double ceiling_ms) {
    if (b == view_.batch) {
      const std::optional<double> ms = p99(b);
      if (!ms || *ms > ceiling_ms) return std::nullopt;
      return std::make_pair(policy_.ServingCapacity(view_), *ms);
    }
    const auto it = plans_.find(b);
    if (it == plans_.end()) return std::nullopt;
    const std::optional<BurstPlan> most = MostBurstWithin(
        *policy_.optimizer_, policy_.options_.threads, static_cast<int>(b), it->second, ceiling_ms,
        kBatchForRateNearMost,
        [this](const Plan& plan) {
          const BatchingSimulator::Result r = eval_.Simulate(plan, *arriving_);
          return eval_.TooSlow(r.mean_batch_ms) ? std::numeric_limits<double>::infinity()
                                                : r.p99_ms;
        },
        [this](const Plan& plan) { return policy_.BurstCapacity(plan, view_); });
    if (!most || (keeping_capacity_ && GivesUp(most->plan))) {
      return std::nullopt;
    }
    bursts_[b] = most->burst;
    burst_plans_[b] = PlanChoice{most->plan, eval_.Capacity(most->plan), std::nullopt,
                                 eval_.Simulate(most->plan, *arriving_)};
    return std::make_pair(most->burst, most->latency_ms);
  }

  const Autoscaler& policy_;
  const ServingView& view_;
  const std::optional<double> arriving_;
  const Candidates& candidates_;  // at arriving_
  const PlanEvaluator eval_;
  const bool keeping_capacity_;
  std::optional<PlanEvaluator> cautious_;  // keeping capacity
  double serving_to_keep_ = 0;             // the serving set's CapacityToKeep
  std::map<int64_t, std::optional<double>> capacities_;
  std::map<int64_t, double> p99s_;  // ms, at the rate: a batch model's candidates
  std::map<int64_t, Plan> plans_;
  std::map<int64_t, Plan> gives_up_;
  std::map<int64_t, std::optional<PlanChoice>> keeping_plans_;
  std::map<int64_t, PlanChoice> burst_plans_;
  std::map<int64_t, double> bursts_;
  double serving_capacity_ = 0;  // asked first: StepDownBatch starts from the serving B
  bool below_minimum_ = false;
};

namespace {

std::string BurstText(double rows_per_s, double p99_ms) {
  return "serves " + std::to_string(std::lround(rows_per_s)) +
         " rows/s from a backlog at a simulated p99 of " + std::to_string(std::lround(p99_ms)) +
         " ms";
}

}  // namespace

std::string Autoscaler::KeepingCapacityText(const StepDownTable& table) const {
  std::ostringstream text;
  text << "no smaller plan of as much capacity has a lower p99";
  for (const auto& [b, plan] : table.gives_up()) {
    text << "; B=" << b << "'s " << plan.ConfigString() << " gives up capacity ("
         << CapacityText(table.capacity(b)) << ")";
  }
  for (const auto& [b, ms] : table.p99s()) {
    text << "; B=" << b << " " << std::lround(ms) << " ms";
  }
  return text.str();
}

std::chrono::milliseconds Autoscaler::PeakSpan(const Inputs& in) const {
  return std::max(in.window, std::chrono::milliseconds(options_.scale_down_delay_ms));
}

RateOverFn Autoscaler::RecentPeak(const Inputs& in) const {
  return [&arrivals = in.load.arrivals(), span = PeakSpan(in)](int64_t ms) {
    return arrivals.PeakOver(std::chrono::milliseconds(ms), span);
  };
}

std::optional<Autoscaler::PeakUnknown> Autoscaler::WhyPeakUnknown(const Inputs& in) const {
  if (in.load.arrivals().Seen(in.now) < PeakSpan(in)) return PeakUnknown::kArrivalsYoung;
  if (in.state.last_overload_move && in.now - *in.state.last_overload_move <
                                         std::chrono::milliseconds(options_.scale_down_delay_ms)) {
    return PeakUnknown::kOverloadMove;
  }
  if (ArrivalsRising(in)) return PeakUnknown::kArrivalsRising;
  return std::nullopt;
}

bool Autoscaler::WithinScaleDownDelay(const Inputs& in) const {
  return WhyPeakUnknown(in).has_value();
}

bool Autoscaler::ArrivalsRising(const Inputs& in) const {
  const ArrivalRate& arrivals = in.load.arrivals();
  // The level the arrivals reached before this window, or, where the span holds no earlier
  // window, their mean over it.
  std::optional<double> reached = arrivals.PeakOver(in.window, PeakSpan(in), in.window);
  if (!reached) reached = arrivals.Over(PeakSpan(in));
  if (!in.arriving || !reached) return false;
  const double seconds = std::chrono::duration<double>(in.window).count();
  return AbovePoissonNoise(*in.arriving * seconds, *reached * seconds, kOverloadSigmas);
}

bool Autoscaler::ServingMeetsTarget(const Inputs& in) const {
  if (options_.p99_target_ms <= 0 || options_.generative || !in.arriving || *in.arriving <= 0) {
    return false;
  }
  return Evaluator(in.view).SimulatedP99Ms(ServingPlan(in.view), *in.arriving) <=
         options_.p99_target_ms;
}

int64_t Autoscaler::PeakWindowMs(const Inputs& in) const {
  return options_.overload_window_ms > 0 ? options_.overload_window_ms : in.window.count();
}

std::optional<int64_t> Autoscaler::StepDown(const Inputs& in, Step* step) const {
  const ServingView& view = in.view;
  const int64_t decision = *in.estimate;
  const std::optional<double>& arriving = in.arriving;
  const int64_t current = view.batch;
  Reason& r = step->reason;
  r.to_batch = decision;
  // A step that gives up capacity must know the peak it will meet, and only a lower p99 than
  // the target asks for pays for it; one that gives up none meets any peak the serving set
  // meets, and goes for a lower p99 whenever one is found (GivesUpCapacity).
  const std::optional<PeakUnknown> why = WhyPeakUnknown(in);
  const bool within_target = !why && ServingMeetsTarget(in);
  const bool keeping_capacity = why.has_value() || within_target;
  // Fewer rows in the system may only mean that the serving plan keeps up: the step down goes
  // only as far as a plan that the arrivals within the last scale_down_delay_ms (or the
  // estimator's window, if longer) would not have overloaded (StepDownBatch), else the overload
  // path would soon move B back up; and among those, at a known rate, to the smallest whose
  // requests' simulated p99 is near the lowest.
  const std::chrono::milliseconds peak_window(PeakWindowMs(in));
  const RateOverFn peak = RecentPeak(in);
  StepDownTable table(*this, in, keeping_capacity);
  bool for_burst = false;
  const std::optional<int64_t> b = StepDownBatch(
      current, decision, peak_window.count(), options_.max_utilization, peak,
      [&](int64_t b) { return table.Capacity(b); }, [&](int64_t b) { return table.P99(b); },
      table.Reserve(), &for_burst);
  r.peak_rate = peak(peak_window.count());
  r.serving_p99_ms = table.p99(current);
  if (!b && why) {
    ExplainPeakUnknown(*why, in, table, &r);
  } else if (!b && within_target) {
    ExplainWithinTarget(in, table, &r);
  } else if (!b) {
    ExplainStepDownHold(table, view, decision, arriving, for_burst, peak_window, &r);
  } else {
    DescribeStepDown(in, table, *b, for_burst, keeping_capacity, step);
  }
  return b;
}

void Autoscaler::ExplainPeakUnknown(PeakUnknown why, const Inputs& in, const StepDownTable& table,
                                    Reason* r) const {
  r->rule = Rule::kScaleDownDelay;
  r->peak_rate.reset();
  const std::string span = std::to_string(PeakSpan(in).count()) + " ms";
  r->text = "keeping B=" + std::to_string(in.view.batch) + ": ";
  switch (why) {
    case PeakUnknown::kArrivalsYoung:
      r->text +=
          "the arrivals, whose peak a smaller plan must absorb, were first counted less than " +
          span + " ago";
      break;
    case PeakUnknown::kOverloadMove:
      r->text += "the overload move to it was less than " +
                 std::to_string(options_.scale_down_delay_ms) + " ms ago";
      break;
    case PeakUnknown::kArrivalsRising:
      r->text += "the arrivals still rise above their mean over " + span +
                 ": the peak a smaller plan must absorb is not known yet";
      break;
  }
  r->text += "; " + KeepingCapacityText(table);
}

void Autoscaler::ExplainWithinTarget(const Inputs& in, const StepDownTable& table,
                                     Reason* r) const {
  r->rule = Rule::kWithinTarget;
  r->quiet = true;  // recurs at each decision while the load stays low
  r->rate = in.arriving;
  r->peak_rate.reset();
  r->text = "keeping B=" + std::to_string(in.view.batch) + ": at " +
            std::to_string(in.arriving.value_or(0)) +
            " rows/s its requests' simulated p99 meets batching.p99_target_ms (" +
            std::to_string(std::lround(options_.p99_target_ms)) +
            " ms); capacity is not given up for less; " + KeepingCapacityText(table);
}

void Autoscaler::DescribeStepDown(const Inputs& in, const StepDownTable& table, int64_t b,
                                  bool for_burst, bool keeping_capacity, Step* step) const {
  const int64_t decision = *in.estimate;
  const int64_t current = in.view.batch;
  Reason& r = step->reason;
  const std::string reserve_ms =
      " (the burst reserve: " + std::to_string(std::lround(options_.burst_reserve_ms)) + " ms)";
  auto rows_p99 = [&](int64_t b) {
    const std::optional<double> ms = table.p99(b);
    return CapacityText(table.capacity(b)) +
           (ms ? ", a simulated p99 of " + std::to_string(std::lround(*ms)) + " ms" : "");
  };
  if (for_burst) {
    step->plan = table.burst_plan(b);
    step->capped = "; for a burst: " + step->plan->plan.ConfigString() + " " +
                   BurstText(table.burst(b), step->plan->simulated->p99_ms) + ", near the lowest" +
                   reserve_ms;
  } else if (b != decision) {
    step->capped = "; recent peak " + std::to_string(r.peak_rate.value_or(0)) +
                   " rows/s: the estimate " + std::to_string(decision) + " serves " +
                   rows_p99(decision) + ", " + std::to_string(b) + " serves " + rows_p99(b) +
                   "; the serving plan " + rows_p99(current);
  }
  if (keeping_capacity && !for_burst) {
    step->plan = table.keeping_plan(b);
    step->capped += "; it gives up no capacity";
  }
  r.target_capacity = table.capacity(b);
  r.target_p99_ms = table.p99(b);
}

void Autoscaler::ExplainStepDownHold(const StepDownTable& table, const ServingView& view,
                                     int64_t decision, std::optional<double> arriving,
                                     bool for_burst, std::chrono::milliseconds peak_window,
                                     Reason* r) const {
  const int64_t current = view.batch;
  const std::string keeping = "keeping B=" + std::to_string(current);
  if (for_burst) {
    // The serving plan's p99 is within the reserve of the lowest, and its runtimes serve more
    // from a backlog than the lowest p99's plan.
    const auto lowest =
        std::min_element(table.p99s().begin(), table.p99s().end(),
                         [](const auto& x, const auto& y) { return x.second < y.second; });
    r->rule = Rule::kBurstReserve;
    r->quiet = true;  // recurs at each decision while the load stays low
    r->to_batch = lowest->first;
    r->target_p99_ms = lowest->second;
    r->serving_capacity = ServingCapacity(view);
    r->target_capacity = table.Burst(lowest->first);
    r->text = keeping + " for a burst: the serving plan " +
              BurstText(*r->serving_capacity, table.p99(current).value_or(0)) +
              "; B=" + std::to_string(lowest->first) + "'s, the lowest p99, " +
              BurstText(r->target_capacity.value_or(0), lowest->second) +
              " (the burst reserve: " + std::to_string(std::lround(options_.burst_reserve_ms)) +
              " ms)";
  } else if (r->serving_p99_ms) {  // ranked: the serving plan fares better
    std::ostringstream text;
    text << keeping << ": at " << arriving.value_or(0)
         << " rows/s its requests see a simulated p99 of " << std::lround(*r->serving_p99_ms)
         << " ms, within 5% of the lowest or below it, of every smaller plan the recent "
            "arrivals allow: a step down would give up capacity for no lower p99";
    for (const auto& [other, ms] : table.p99s()) {
      if (other != current) text << ", B=" << other << " " << std::lround(ms) << " ms";
    }
    r->rule = Rule::kServingP99Lowest;
    r->target_p99_ms = table.p99(decision);
    r->text = text.str();
  } else if (table.below_minimum()) {
    r->rule = Rule::kMinCapacity;
    r->target_capacity = table.capacity(decision);
    r->quiet = true;  // recurs at each decision while the load stays low
    r->text = keeping + ": every smaller plan the recent arrivals allow runs less than " +
              "reconfiguration.min_capacity (" + CapacityText(options_.min_capacity) + ")";
  } else {
    r->rule = Rule::kPeakGuard;
    r->target_capacity = table.capacity(decision);
    r->text = keeping + ": from the estimate B=" + std::to_string(decision) + " (" +
              CapacityText(table.capacity(decision)) +
              ") up, every smaller plan would have been overloaded by the recent arrivals (a "
              "peak of " +
              std::to_string(r->peak_rate.value_or(0)) + " rows/s over " +
              std::to_string(peak_window.count()) + " ms)";
  }
}

}  // namespace packrat
