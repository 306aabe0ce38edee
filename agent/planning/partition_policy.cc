#include "agent/planning/partition_policy.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

namespace packrat {
namespace {

double Worst(const std::vector<PartitionModel>& models, bool target) {
  double worst = 0;
  for (const PartitionModel& m : models)
    worst = std::max(worst, target ? m.ratio_target : m.ratio_now);
  return worst;
}

// Whether `m` lacks CPUs (rule 1) now, or at the target.
bool Lacks(const PartitionModel& m, bool target) {
  if (m.rate <= 0) return false;
  if (!target) return m.behind;
  const bool unsustained = std::isinf(m.p99_target_ms);
  if (m.target_cpus < m.current_cpus) return m.behind || unsustained;
  return m.behind && (m.target_cpus == m.current_cpus || unsustained);
}

int Lacking(const std::vector<PartitionModel>& models, bool target) {
  int n = 0;
  for (const PartitionModel& m : models) n += Lacks(m, target) ? 1 : 0;
  return n;
}

// Whether every model with traffic has a p99 target and meets it now, and the target shrinks
// one of them.
bool WithinTargetsShrinking(const std::vector<PartitionModel>& models) {
  bool shrinks = false;
  for (const PartitionModel& m : models) {
    if (m.rate <= 0) continue;
    if (!m.slo_ms || !(m.p99_now_ms <= *m.slo_ms)) return false;
    shrinks = shrinks || m.target_cpus < m.current_cpus;
  }
  return shrinks;
}

}  // namespace

std::string_view PartitionReasonName(PartitionReason reason) {
  static constexpr std::string_view kNames[] = {"floor",
                                                "unsustained",
                                                "overloaded",
                                                "gain",
                                                "no change",
                                                "starves",
                                                "within targets",
                                                "gain below min_gain",
                                                "cost exceeds gain",
                                                "unconfirmed",
                                                "cooldown",
                                                "shrink restarts"};
  static_assert(std::size(kNames) == static_cast<size_t>(PartitionReason::kShrinkRestarts) + 1);
  return kNames[static_cast<size_t>(reason)];
}

std::string PartitionDecision::Why() const {
  std::string why(PartitionReasonName(reason));
  if (!model.empty()) why += " '" + model + "'";
  return why;
}

bool PartitionPolicy::Confirm(const std::vector<PartitionModel>& models) {
  std::map<std::string, int> target;
  bool changes = false;
  for (const PartitionModel& m : models) {
    target[m.name] = m.target_cpus;
    changes = changes || m.target_cpus != m.current_cpus;
  }
  seen_ = target == last_target_ ? seen_ + 1 : 1;
  last_target_ = std::move(target);
  return changes;
}

std::optional<PartitionReason> PartitionPolicy::Needed(const std::vector<PartitionModel>& models) {
  for (const PartitionModel& m : models) {
    if (m.current_cpus < m.min_threads) return PartitionReason::kFloor;
  }
  const int before = Lacking(models, false);
  const int after = Lacking(models, true);
  if (after < before) return PartitionReason::kUnsustained;
  if (after > before) return std::nullopt;
  // A model that lacks CPUs both now and at the target gains capacity with every CPU it gets.
  for (const PartitionModel& m : models) {
    if (Lacks(m, false) && Lacks(m, true) && m.target_cpus > m.current_cpus) {
      return PartitionReason::kOverloaded;
    }
  }
  return std::nullopt;
}

void PartitionPolicy::Weigh(const std::vector<PartitionModel>& models, PartitionDecision* d) const {
  const double switch_s =
      std::chrono::duration<double>(switch_time_.value_or(options_.default_switch)).count();
  for (const PartitionModel& m : models) {
    if (m.rate <= 0) continue;
    const double horizon_s =
        std::chrono::duration<double>(std::min<std::chrono::milliseconds>(
                                          options_.horizon, m.rate_age.value_or(options_.horizon)))
            .count();
    // An infinite p99 now (a share that does not serve the rate at all) counts neither.
    const double now_ms = std::isinf(m.p99_now_ms) ? 0 : m.p99_now_ms;
    if (std::isfinite(m.p99_now_ms) && std::isfinite(m.p99_target_ms)) {
      d->gain_ms += horizon_s * m.rate * std::max(0.0, m.p99_now_ms - m.p99_target_ms);
    }
    if (m.target_cpus != m.current_cpus) d->cost_ms += switch_s * m.rate * now_ms;
  }
}

PartitionDecision PartitionPolicy::Decide(const std::vector<PartitionModel>& models,
                                          std::chrono::steady_clock::time_point now) {
  PartitionDecision d;
  d.worst_now = Worst(models, false);
  d.worst_target = Worst(models, true);
  const auto held = [&d](PartitionReason reason, std::string model = {}) {
    d.reason = reason;
    d.model = std::move(model);
    return d;
  };
  if (!Confirm(models)) return held(PartitionReason::kNoChange);
  // 1: correctness first.
  if (const std::optional<PartitionReason> needed = Needed(models)) {
    d.move = true;
    return held(*needed);
  }
  // 2: never at the expense of a model that would then not keep up (its p99 at the target is
  // infinite, and so would be its switch's cost).
  for (const PartitionModel& m : models) {
    if (m.rate > 0 && m.target_cpus < m.current_cpus && std::isinf(m.p99_target_ms)) {
      return held(PartitionReason::kStarves, m.name);
    }
  }
  if (WithinTargetsShrinking(models)) return held(PartitionReason::kWithinTargets);
  if (!(d.worst_target <= (1 - options_.min_gain) * d.worst_now)) {
    return held(PartitionReason::kBelowMinGain);  // 2a
  }
  Weigh(models, &d);
  if (!(d.gain_ms > d.cost_ms)) return held(PartitionReason::kCostExceedsGain);    // 2b
  if (seen_ < options_.confirmations) return held(PartitionReason::kUnconfirmed);  // 2c
  if (last_move_end_ && now - *last_move_end_ < options_.cooldown) {
    return held(PartitionReason::kCooldown);  // 2d
  }
  d.move = true;
  return held(PartitionReason::kGain);
}

void PartitionPolicy::MoveDone(std::chrono::steady_clock::time_point now,
                               std::chrono::milliseconds took) {
  last_move_end_ = now;
  switch_time_ = std::max(took, std::chrono::milliseconds(100));
  seen_ = 0;
}

}  // namespace packrat
