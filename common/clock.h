// Clock: the seam between code that decides by time and the time it runs at. Production code
// takes a Clock* (Clock::Real(): std::chrono::steady_clock); tests give a FakeClock and move it
// by hand, so that a control loop's decisions, timeouts and hold-offs are tested in
// microseconds and never depend on how busy the machine is (Envoy's TimeSource and
// SimulatedTimeSystem).
//
// Thread-safety: both implementations may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace packrat {

using SteadyTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;

  virtual SteadyTime Now() const = 0;

  // Sleeps on `cv` with `mu` held (released while asleep, held again on return) until `cv` is
  // notified, or until Now() reaches `deadline`. Returns false once the deadline has passed.
  // Spurious wake-ups happen: callers loop.
  virtual bool WaitUntil(CondVar* cv, Mutex* mu, SteadyTime deadline) REQUIRES(mu) = 0;

  // The process's steady clock. Never destroyed.
  static Clock* Real();
};

// A clock that stands still until Advance()/Set() move it. A WaitUntil on it sleeps until its
// condition variable is notified or the fake time reaches the deadline; moving the time wakes
// every sleeper (under its mutex, so that a wake-up between a sleeper's check and its sleep is
// never lost).
//
// Contract: a sleeper's Mutex and CondVar outlive every Advance()/Set() that may overlap its
// WaitUntil (they are the sleeper's own members in practice). The lock order is the sleeper's
// Mutex, then the clock's own.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(SteadyTime start = SteadyTime{} + std::chrono::hours(1)) : now_(start) {}

  SteadyTime Now() const override;
  bool WaitUntil(CondVar* cv, Mutex* mu, SteadyTime deadline) REQUIRES(mu) override;

  void Advance(std::chrono::nanoseconds by);
  // Never moves backwards: an earlier time is ignored.
  void Set(SteadyTime to);
  // How many times WaitUntil began to sleep, ever.
  uint64_t sleeps() const;
  // Blocks until WaitUntil has begun to sleep at least `n` times in all (a loop that sleeps on
  // this clock has finished what the last Advance made due), or for `real_timeout` of real
  // time; returns whether it did. For tests.
  bool AwaitSleeps(uint64_t n, std::chrono::milliseconds real_timeout = std::chrono::seconds(30));

 private:
  struct Sleeper {
    CondVar* cv;
    Mutex* mu;
  };
  void WakeAll() EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar slept_;  // signalled when sleeps_ grows
  SteadyTime now_ GUARDED_BY(mu_);
  std::vector<Sleeper> sleepers_ GUARDED_BY(mu_);
  uint64_t sleeps_ GUARDED_BY(mu_) = 0;
};

}  // namespace packrat
