#include "agent/planning/slowdown_tracker.h"

#include <algorithm>
#include <cstdlib>

namespace packrat {

void SlowdownTracker::Record(int threads, double ratio, SteadyTime began) {
  MutexLock lock(&mu_);
  if (switching_ > 0 || began < last_switch_end_) return;
  Estimate& e = estimates_[threads];
  ++e.slices;
  const double weight = std::max(alpha_, 1.0 / static_cast<double>(e.slices));
  e.value += weight * (ratio - e.value);
}

void SlowdownTracker::BeginSwitch() {
  MutexLock lock(&mu_);
  ++switching_;
}

void SlowdownTracker::EndSwitch(SteadyTime now) {
  MutexLock lock(&mu_);
  --switching_;
  last_switch_end_ = std::max(last_switch_end_, now);
}

const SlowdownTracker::Estimate* SlowdownTracker::MeasuredLocked(int threads) const {
  auto it = estimates_.find(threads);
  return it != estimates_.end() && it->second.slices >= min_slices_ ? &it->second : nullptr;
}

double SlowdownTracker::Get(int threads) const {
  MutexLock lock(&mu_);
  return GetLocked(threads);
}

double SlowdownTracker::GetLocked(int threads) const {
  if (const Estimate* e = MeasuredLocked(threads)) return std::max(fastest_, e->value);
  // The slowest thread count measured; below 1 only if one with more threads than `threads`
  // is measured (see the header). The profile's figures until some thread count is measured.
  double slowest = 0;
  bool larger = false;
  for (const auto& [t, e] : estimates_) {
    if (e.slices < min_slices_) continue;
    slowest = std::max(slowest, e.value);
    larger = larger || t > threads;
  }
  return larger ? std::max(fastest_, slowest) : std::max(1.0, slowest);
}

bool SlowdownTracker::Measured(int threads) const {
  MutexLock lock(&mu_);
  return MeasuredLocked(threads) != nullptr;
}

double SlowdownTracker::Exploring(int threads, int budget) const {
  MutexLock lock(&mu_);
  const double slowdown = GetLocked(threads);
  if (MeasuredLocked(threads) != nullptr) return slowdown;
  // The measured count nearest in threads (the fatter one on a tie).
  const Estimate* nearest = nullptr;
  int nearest_threads = 0;
  for (const auto& [t, e] : estimates_) {
    if (e.slices < min_slices_) continue;
    if (nearest == nullptr || std::abs(t - threads) <= std::abs(nearest_threads - threads)) {
      nearest = &e;
      nearest_threads = t;
    }
  }
  const auto neighbours = [budget](int t) {
    return budget > 1 ? std::max(0.0, static_cast<double>(budget - t) / (budget - 1)) : 0.0;
  };
  if (nearest == nullptr || nearest->value <= 1 || neighbours(nearest_threads) <= 0) {
    return std::min(1.0, slowdown);
  }
  const double per_share = (nearest->value - 1) / neighbours(nearest_threads);
  return std::max(fastest_, 1 + per_share * neighbours(threads));
}

}  // namespace packrat
