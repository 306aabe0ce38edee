#include "agent/planning/slowdown_tracker.h"

#include <algorithm>

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
  if (const Estimate* e = MeasuredLocked(threads)) return std::max(fastest_, e->value);
  // Not measured: its profile, unless two or more thread counts have been measured slower
  // than theirs; then the least of their slowdowns.
  int measured = 0;
  double least = 0;
  for (const auto& [t, estimate] : estimates_) {
    if (MeasuredLocked(t) == nullptr) continue;
    least = measured++ == 0 ? estimate.value : std::min(least, estimate.value);
  }
  return measured >= 2 ? std::max(1.0, least) : 1.0;
}

bool SlowdownTracker::Measured(int threads) const {
  MutexLock lock(&mu_);
  return MeasuredLocked(threads) != nullptr;
}

}  // namespace packrat
