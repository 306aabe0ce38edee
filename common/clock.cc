#include "common/clock.h"

#include <algorithm>

namespace packrat {
namespace {

class RealClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  bool WaitUntil(CondVar* cv, Mutex* mu, SteadyTime deadline) REQUIRES(mu) override {
    cv->WaitUntil(mu, deadline);
    return std::chrono::steady_clock::now() < deadline;
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* const clock = new RealClock();
  return clock;
}

SteadyTime FakeClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitUntil(CondVar* cv, Mutex* mu, SteadyTime deadline) {
  {
    MutexLock lock(&mu_);
    if (now_ >= deadline) return false;
    sleepers_.push_back({cv, mu});
    ++sleeps_;
    slept_.NotifyAll();
  }
  // An Advance() from here on takes `mu` before it notifies, which this thread holds until
  // Wait() releases it: the wake-up cannot fall between the check above and the sleep.
  cv->Wait(mu);
  MutexLock lock(&mu_);
  auto it = std::find_if(sleepers_.begin(), sleepers_.end(),
                         [&](const Sleeper& s) { return s.cv == cv && s.mu == mu; });
  if (it != sleepers_.end()) sleepers_.erase(it);
  return now_ < deadline;
}

void FakeClock::Advance(std::chrono::nanoseconds by) {
  {
    MutexLock lock(&mu_);
    now_ += std::chrono::duration_cast<SteadyTime::duration>(by);
  }
  WakeAll();
}

void FakeClock::Set(SteadyTime to) {
  {
    MutexLock lock(&mu_);
    now_ = std::max(now_, to);
  }
  WakeAll();
}

uint64_t FakeClock::sleeps() const {
  MutexLock lock(&mu_);
  return sleeps_;
}

bool FakeClock::AwaitSleeps(uint64_t n, std::chrono::milliseconds real_timeout) {
  const auto deadline = std::chrono::steady_clock::now() + real_timeout;
  MutexLock lock(&mu_);
  while (sleeps_ < n) {
    if (!slept_.WaitUntil(&mu_, deadline) && sleeps_ < n) return false;
  }
  return true;
}

void FakeClock::WakeAll() {
  std::vector<Sleeper> sleepers;
  {
    MutexLock lock(&mu_);
    sleepers = sleepers_;
  }
  for (const Sleeper& s : sleepers) {
    MutexLock lock(s.mu);
    s.cv->NotifyAll();
  }
}

}  // namespace packrat
