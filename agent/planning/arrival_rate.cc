#include "agent/planning/arrival_rate.h"

#include <cassert>

namespace packrat {

ArrivalRate::ArrivalRate(Duration horizon) : horizon_(horizon) {
  assert(horizon > Duration::zero());
}

void ArrivalRate::Sample(SteadyTime now, int64_t total) {
  if (!samples_.empty() && (now <= samples_.back().first || total < samples_.back().second)) {
    return;
  }
  samples_.emplace_back(now, total);
  // Keep one sample at or beyond the horizon, so that a span equal to it can still be answered.
  while (samples_.size() > 2 && now - samples_[1].first >= horizon_) samples_.pop_front();
}

std::optional<double> ArrivalRate::Over(Duration span) const {
  if (samples_.size() < 2 || span <= Duration::zero()) return std::nullopt;
  const auto& [newest_time, newest_total] = samples_.back();
  // The newest sample at least `span` older than the newest one.
  for (auto it = samples_.rbegin() + 1; it != samples_.rend(); ++it) {
    if (newest_time - it->first >= span) {
      const double seconds = std::chrono::duration<double>(newest_time - it->first).count();
      return static_cast<double>(newest_total - it->second) / seconds;
    }
  }
  return std::nullopt;
}

std::optional<double> ArrivalRate::PeakOver(Duration window, Duration span) const {
  if (samples_.size() < 2 || window <= Duration::zero()) return std::nullopt;
  const SteadyTime newest = samples_.back().first;
  std::optional<double> peak;
  size_t start = 0;  // the newest sample at least `window` before samples_[end]
  for (size_t end = 1; end < samples_.size(); ++end) {
    while (start + 1 < end && samples_[end].first - samples_[start + 1].first >= window) ++start;
    const auto& [t0, n0] = samples_[start];
    const auto& [t1, n1] = samples_[end];
    if (t1 - t0 < window || newest - t1 > span) continue;
    const double rate =
        static_cast<double>(n1 - n0) / std::chrono::duration<double>(t1 - t0).count();
    if (!peak || rate > *peak) peak = rate;
  }
  return peak;
}

}  // namespace packrat
