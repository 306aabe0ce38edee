#include "agent/planning/batch_for_rate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "agent/planning/poisson_noise.h"

namespace packrat {
namespace {

// The powers of two above `current_b`, and `max_b` itself, up to `max_b`, ascending.
std::vector<int64_t> LargerBatches(int64_t current_b, int64_t max_b) {
  std::vector<int64_t> out;
  for (int64_t b = 1;; b = b > max_b / 2 ? max_b : b * 2) {
    if (b > current_b) out.push_back(b);
    if (b >= max_b) break;
  }
  return out;
}

// Among `candidates` (ascending b, with capacities): the smallest b whose capacity is within
// kBatchForRateNearMost of the highest, if the highest exceeds `current` by
// kBatchForRateMinGain; nullopt otherwise.
std::optional<int64_t> SmallestNearMost(const std::vector<std::pair<int64_t, double>>& candidates,
                                        double current) {
  double most = 0;
  for (const auto& [b, c] : candidates) most = std::max(most, c);
  if (candidates.empty() || most < kBatchForRateMinGain * current) return std::nullopt;
  for (const auto& [b, c] : candidates) {
    if (c >= kBatchForRateNearMost * most) return b;
  }
  return std::nullopt;  // not reached: the highest capacity is a candidate
}

}  // namespace

std::optional<int64_t> BatchForRate(double rate, int64_t current_b, int64_t max_b,
                                    double max_utilization, const CapacityFn& capacity) {
  std::vector<std::pair<int64_t, double>> candidates;  // ascending b
  for (int64_t b : LargerBatches(current_b, max_b)) {
    const std::optional<double> c = capacity(b);
    if (c && *c > 0) {
      if (rate <= max_utilization * *c) return b;
      candidates.emplace_back(b, *c);
    }
  }
  return SmallestNearMost(candidates, capacity(current_b).value_or(0));
}

std::optional<int64_t> OverloadBatch(double rate, double window_s, int64_t max_b, double floor,
                                     const CapacityFn& capacity, const P99Fn& p99) {
  std::vector<std::pair<int64_t, double>> all;      // ascending b, with capacities
  std::vector<std::pair<int64_t, double>> keep_up;  // above floor and keeping up: b and p99
  double lowest = std::numeric_limits<double>::infinity();
  for (int64_t b : LargerBatches(0, max_b)) {
    const std::optional<double> c = capacity(b);
    if (!c || *c <= 0) continue;
    all.emplace_back(b, *c);
    if (!(*c > floor) || !KeepsUpBeyondChance(rate, window_s, *c)) continue;
    const double ms = p99(b).value_or(std::numeric_limits<double>::infinity());
    keep_up.emplace_back(b, ms);
    lowest = std::min(lowest, ms);
  }
  for (const auto& [b, ms] : keep_up) {
    if (ms <= kNearLowestP99 * lowest) return b;
  }
  // None keeps up: the smallest near the most capacity of every B, where it serves more than
  // `floor` (a larger B that does would trade far longer batches for a few percent).
  const std::optional<int64_t> near_most = SmallestNearMost(all, 0);
  for (const auto& [b, c] : all) {
    if (near_most && b == *near_most && c > floor) return b;
  }
  return std::nullopt;
}

bool KeepsUpBeyondChance(double rate, double window_s, double capacity) {
  const double s = std::max(window_s, 1e-3);
  return AbovePoissonNoise(capacity * s, rate * s, kOverloadSigmas);
}

std::optional<int64_t> StepUpBatch(int64_t current_b, int64_t wanted_b,
                                   const CapacityFn& capacity) {
  std::vector<std::pair<int64_t, double>> candidates;  // ascending b
  for (int64_t b : LargerBatches(current_b, wanted_b)) {
    const std::optional<double> c = capacity(b);
    if (c && *c > 0) candidates.emplace_back(b, *c);
  }
  return SmallestNearMost(candidates, capacity(current_b).value_or(0));
}

namespace {

// StepDownBatch's burst reserve: from the step's choice `chosen` among `passed` (b and p99,
// ascending b; `lowest` the lowest p99 with the serving plan's), the plan that absorbs the
// most of a burst within the reserve's slack, where it absorbs enough more (see the header).
std::optional<int64_t> WithBurstReserve(
    int64_t current_b, const std::vector<std::pair<int64_t, std::optional<double>>>& passed,
    double lowest, std::optional<int64_t> chosen, const BurstReserve& reserve, bool* for_burst) {
  struct Held {
    int64_t b;
    double burst;
    double p99_ms;
  };
  std::vector<Held> within;  // ascending b, the serving plan last
  for (const auto& [b, ms] : passed) {
    if (auto most = reserve.most_within(b, lowest + reserve.slack_ms)) {
      within.push_back({b, most->first, most->second});
    }
  }
  if (auto most = reserve.most_within(current_b, lowest + reserve.slack_ms)) {
    within.push_back({current_b, most->first, most->second});
  }
  double most = 0;
  for (const Held& h : within) most = std::max(most, h.burst);
  if (most <= 0) return chosen;
  const double base_burst = reserve.burst(chosen.value_or(current_b)).value_or(0);
  const Held* held_serving =
      !within.empty() && within.back().b == current_b ? &within.back() : nullptr;
  // Kept: the serving runtimes are within the slack, the step would give up some of what they
  // absorb, and nothing within it absorbs kBurstReserveMinGain more.
  if (chosen && held_serving && held_serving->burst >= kBatchForRateMinGain * base_burst &&
      most < kBurstReserveMinGain * held_serving->burst) {
    if (for_burst != nullptr) *for_burst = true;
    return std::nullopt;
  }
  // Moved: only where the plan absorbs kBurstReserveMinGain more than the step's choice and the
  // serving plan do (between plans that close, the switch's own seconds weigh more).
  if (most < kBurstReserveMinGain * base_burst ||
      (held_serving && most < kBurstReserveMinGain * held_serving->burst)) {
    return chosen;
  }
  const Held* pick = nullptr;
  for (const Held& h : within) {
    if (h.burst >= kBatchForRateNearMost * most && (pick == nullptr || h.p99_ms < pick->p99_ms)) {
      pick = &h;
    }
  }
  if (for_burst != nullptr) *for_burst = true;
  if (pick->b == current_b) return std::nullopt;
  return pick->b;
}

}  // namespace

bool PeakAllows(double capacity, double serving, int64_t window_ms, double max_utilization,
                const RateOverFn& peak_over) {
  return capacity >= serving || !OverloadedRate(window_ms, max_utilization * capacity, peak_over);
}

std::optional<int64_t> StepDownBatch(int64_t current_b, int64_t wanted_b, int64_t window_ms,
                                     double max_utilization, const RateOverFn& peak_over,
                                     const CapacityFn& capacity, const P99Fn& p99,
                                     const BurstReserve& reserve, bool* for_burst) {
  if (for_burst != nullptr) *for_burst = false;
  std::vector<int64_t> candidates;  // ascending b
  if (wanted_b < current_b) candidates.push_back(wanted_b);
  for (int64_t b : LargerBatches(wanted_b, current_b)) {
    if (b < current_b) candidates.push_back(b);
  }
  if (candidates.empty()) return std::nullopt;
  // What the serving plan serves: a candidate serving at least as much cannot fare worse at
  // the peak than it (unknown: no candidate passes on that count).
  const double serving = capacity(current_b).value_or(std::numeric_limits<double>::infinity());
  std::vector<std::pair<int64_t, std::optional<double>>> passed;  // b and its p99, ascending b
  for (int64_t b : candidates) {
    const std::optional<double> c = capacity(b);
    if (!c || *c <= 0) continue;
    if (PeakAllows(*c, serving, window_ms, max_utilization, peak_over)) {
      passed.emplace_back(b, p99(b));
    }
  }
  if (passed.empty()) return std::nullopt;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& [b, ms] : passed) {
    if (!ms) return passed.front().first;  // no ranking without every candidate's p99
    lowest = std::min(lowest, *ms);
  }
  const std::optional<double> serving_p99 = p99(current_b);
  if (serving_p99) lowest = std::min(lowest, *serving_p99);
  std::optional<int64_t> chosen;  // nullopt: the serving plan's requests fare as well
  if (!serving_p99 || *serving_p99 > kNearLowestP99 * lowest) {
    for (const auto& [b, ms] : passed) {
      if (*ms <= kNearLowestP99 * lowest) {
        chosen = b;
        break;
      }
    }
  }
  if (reserve.slack_ms <= 0 || !reserve.burst || !reserve.most_within) return chosen;
  return WithBurstReserve(current_b, passed, lowest, chosen, reserve, for_burst);
}

int64_t BacklogBatch(int64_t current_b, int64_t max_b, const CapacityFn& capacity) {
  int64_t best = current_b;
  double served = capacity(current_b).value_or(0);  // unknown: any known capacity is a gain
  // The powers of two, and B doubled: B's rows per instance doubled covers B's instances as
  // evenly as B does.
  std::vector<int64_t> sizes = LargerBatches(current_b, max_b);
  for (int64_t b = 2 * current_b; current_b > 0 && b < max_b; b *= 2) sizes.push_back(b);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int64_t b : sizes) {
    const std::optional<double> c = capacity(b);
    if (!c || *c <= 0) continue;
    if (*c < kBatchForRateMinGain * served) {
      // B doubled gains too little: larger batches would only creep up. Another size may
      // cover the instances unevenly, where the next multiple of B covers them evenly again.
      if (current_b <= 0 || b % current_b == 0) break;
      continue;
    }
    best = b;
    served = *c;
  }
  return best;
}

bool ArrivalsExceedCapacity(double arrived, double seconds, double capacity) {
  const double expected = capacity * seconds;
  if (expected <= 0) return arrived > 0;  // a plan serving nothing
  return AbovePoissonNoise(arrived, expected, kOverloadSigmas);
}

std::optional<double> OverloadedRate(int64_t window_ms, double capacity,
                                     const RateOverFn& rate_over) {
  for (int64_t ms = window_ms; ms > 0 && ms <= 4 * window_ms; ms *= 2) {
    const std::optional<double> rate = rate_over(ms);
    if (!rate) break;
    const double seconds = static_cast<double>(ms) / 1e3;
    if (ArrivalsExceedCapacity(*rate * seconds, seconds, capacity)) return rate;
  }
  return std::nullopt;
}

}  // namespace packrat
