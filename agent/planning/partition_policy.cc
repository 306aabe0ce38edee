#include "agent/planning/partition_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace packrat {
namespace {

double Worst(const std::vector<PartitionModel>& models, bool target) {
  double worst = 0;
  for (const PartitionModel& m : models)
    worst = std::max(worst, target ? m.ratio_target : m.ratio_now);
  return worst;
}

int Unsustained(const std::vector<PartitionModel>& models, bool target) {
  int n = 0;
  for (const PartitionModel& m : models) {
    if (m.rate > 0 && std::isinf(target ? m.p99_target_ms : m.p99_now_ms)) ++n;
  }
  return n;
}

}  // namespace

PartitionDecision PartitionPolicy::Decide(const std::vector<PartitionModel>& models,
                                          std::chrono::steady_clock::time_point now) {
  PartitionDecision d;
  d.worst_now = Worst(models, false);
  d.worst_target = Worst(models, true);

  std::map<std::string, int> target;
  bool changes = false;
  bool floor = false;
  for (const PartitionModel& m : models) {
    target[m.name] = m.target_cpus;
    changes = changes || m.target_cpus != m.current_cpus;
    floor = floor || m.current_cpus < m.min_threads;
  }
  seen_ = target == last_target_ ? seen_ + 1 : 1;
  last_target_ = std::move(target);
  if (!changes) {
    d.why = "no change";
    return d;
  }
  // 1: correctness first.
  if (floor) {
    d.move = true;
    d.why = "floor";
    return d;
  }
  if (Unsustained(models, true) < Unsustained(models, false)) {
    d.move = true;
    d.why = "unsustained";
    return d;
  }
  // 1b: a model that sustains its rate neither now nor at the target gains capacity with every
  // CPU it gets: grow it, unless that leaves another model unsustained.
  if (Unsustained(models, true) <= Unsustained(models, false)) {
    for (const PartitionModel& m : models) {
      if (m.rate > 0 && std::isinf(m.p99_now_ms) && std::isinf(m.p99_target_ms) &&
          m.target_cpus > m.current_cpus) {
        d.move = true;
        d.why = "overloaded";
        return d;
      }
    }
  }
  // 2: never at the expense of a model that would then not keep up (its p99 at the target is
  // infinite, and so would be its switch's cost).
  for (const PartitionModel& m : models) {
    if (m.rate > 0 && m.target_cpus < m.current_cpus && std::isinf(m.p99_target_ms)) {
      d.why = "starves '" + m.name + "'";
      return d;
    }
  }
  // 2a.
  if (!(d.worst_target <= (1 - options_.min_gain) * d.worst_now)) {
    d.why = "gain below min_gain";
    return d;
  }
  // 2b: request-milliseconds over the horizon against those the switch costs.
  const double switch_s =
      std::chrono::duration<double>(switch_time_.value_or(options_.default_switch)).count();
  const double horizon_s = std::chrono::duration<double>(options_.horizon).count();
  for (const PartitionModel& m : models) {
    if (m.rate <= 0) continue;
    const double now_ms = std::isinf(m.p99_now_ms) ? 0 : m.p99_now_ms;
    if (std::isfinite(m.p99_now_ms) && std::isfinite(m.p99_target_ms)) {
      d.gain_ms += horizon_s * m.rate * std::max(0.0, m.p99_now_ms - m.p99_target_ms);
    }
    if (m.target_cpus != m.current_cpus) d.cost_ms += switch_s * m.rate * now_ms;
  }
  if (!(d.gain_ms > d.cost_ms)) {
    d.why = "cost exceeds gain";
    return d;
  }
  // 2c, 2d.
  if (seen_ < options_.confirmations) {
    d.why = "unconfirmed";
    return d;
  }
  if (last_move_end_ && now - *last_move_end_ < options_.cooldown) {
    d.why = "cooldown";
    return d;
  }
  d.move = true;
  d.why = "gain";
  return d;
}

void PartitionPolicy::MoveDone(std::chrono::steady_clock::time_point now,
                               std::chrono::milliseconds took) {
  last_move_end_ = now;
  switch_time_ = std::max(took, std::chrono::milliseconds(100));
  seen_ = 0;
}

}  // namespace packrat
