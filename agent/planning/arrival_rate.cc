#include "agent/planning/arrival_rate.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "agent/planning/poisson_noise.h"

namespace packrat {

ArrivalRate::ArrivalRate(Duration horizon) : horizon_(horizon) {
  assert(horizon > Duration::zero());
}

void ArrivalRate::Sample(SteadyTime now, int64_t total) {
  if (!samples_.empty() && (now <= samples_.back().first || total < samples_.back().second)) {
    return;
  }
  samples_.emplace_back(now, total);
  if (!first_) first_ = now;
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

std::optional<double> ArrivalRate::Shift(double baseline, Duration min_span, Duration max_span,
                                         double sigmas) const {
  if (samples_.size() < 3) return std::nullopt;
  const auto& [newest_time, newest_total] = samples_.back();
  // A baseline of 0 (nothing measured yet) makes any arrival infinitely likelier: a floor keeps
  // the ratio finite without changing which stretch is likeliest.
  const double base = std::max(baseline, 1e-3);
  double best = 0;
  auto step = samples_.rend();  // the sample where the likeliest stretch starts
  for (auto it = samples_.rbegin() + 1; it != samples_.rend(); ++it) {
    const Duration span = newest_time - it->first;
    if (span > max_span) break;
    const double seconds = std::chrono::duration<double>(span).count();
    const double count = static_cast<double>(newest_total - it->second);
    const double rate = count / seconds;
    const double llr = (count > 0 ? count * std::log(rate / base) : 0) - (rate - base) * seconds;
    if (llr > best) {
      best = llr;
      step = it;
    }
  }
  if (step == samples_.rend()) return std::nullopt;
  const double seconds = std::chrono::duration<double>(newest_time - step->first).count();
  const double count = static_cast<double>(newest_total - step->second);
  const double expected = baseline * seconds;
  if (!BeyondPoissonNoise(count, expected, sigmas)) return std::nullopt;
  const auto since = step - 1;  // one sample newer: the stretch after the step's interval
  if (since == samples_.rbegin() || newest_time - since->first < min_span) return std::nullopt;
  // One standard deviation of the count toward the baseline: a short stretch's count is noisy,
  // and a plan sized on a high draw takes CPUs another model needs.
  const double after = static_cast<double>(newest_total - since->second);
  const double after_s = std::chrono::duration<double>(newest_time - since->first).count();
  const double sd = PoissonSd(after);
  return after > baseline * after_s ? std::max(baseline, (after - sd) / after_s)
                                    : std::min(baseline, (after + sd) / after_s);
}

std::optional<double> ArrivalRate::PeakOver(Duration window, Duration span, Duration before) const {
  if (samples_.size() < 2 || window <= Duration::zero()) return std::nullopt;
  const SteadyTime newest = samples_.back().first;
  std::optional<double> peak;
  size_t start = 0;  // the newest sample at least `window` before samples_[end]
  for (size_t end = 1; end < samples_.size(); ++end) {
    while (start + 1 < end && samples_[end].first - samples_[start + 1].first >= window) ++start;
    const auto& [t0, n0] = samples_[start];
    const auto& [t1, n1] = samples_[end];
    if (t1 - t0 < window || newest - t1 > span || newest - t1 < before) continue;
    const double rate =
        static_cast<double>(n1 - n0) / std::chrono::duration<double>(t1 - t0).count();
    if (!peak || rate > *peak) peak = rate;
  }
  return peak;
}

}  // namespace packrat
