#include "agent/planning/batch_for_rate.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace packrat {

std::optional<int64_t> BatchForRate(double rate, int64_t current_b, int64_t max_b,
                                    double max_utilization, const CapacityFn& capacity) {
  std::vector<std::pair<int64_t, double>> candidates;  // ascending b
  for (int64_t b = 1;; b = b > max_b / 2 ? max_b : b * 2) {
    if (b > current_b) {
      const std::optional<double> c = capacity(b);
      if (c && *c > 0) {
        if (rate <= max_utilization * *c) return b;
        candidates.emplace_back(b, *c);
      }
    }
    if (b >= max_b) break;
  }
  double most = 0;
  for (const auto& [b, c] : candidates) most = std::max(most, c);
  const double current = capacity(current_b).value_or(0);
  if (most < kBatchForRateMinGain * current) return std::nullopt;
  for (const auto& [b, c] : candidates) {
    if (c >= kBatchForRateNearMost * most) return b;
  }
  return std::nullopt;  // not reached: the largest capacity is a candidate
}

bool ArrivalsExceedCapacity(double arrived, double seconds, double capacity) {
  const double expected = capacity * seconds;
  return arrived > expected + kOverloadSigmas * std::sqrt(std::max(0.0, expected));
}

}  // namespace packrat
