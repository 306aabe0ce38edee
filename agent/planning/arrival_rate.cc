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

}  // namespace packrat
