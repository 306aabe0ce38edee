// The progress of one emulated computation — a slice, a warm-up pass, a model load — whose
// speed changes while it runs: `work` is its duration at speed 1 (the profile's latency), and
// the work done is the integral of the speed over time. Pure: the caller gives every time.
//
//   SliceProgress p(work, start, rate);   // rate: ContentionRate at `start`
//   p.SetRate(changed_at, new_rate);      // whenever the node's busy counts change
//   if (p.Finished(now)) ...; else sleep until p.FinishAt() or the next change
//
// A value type; not thread-safe.
#pragma once

#include <chrono>

#include "common/clock.h"

namespace packrat::emulator {

class SliceProgress {
 public:
  // `rate` > 0 (smaller values are raised to 1e-6).
  SliceProgress(std::chrono::nanoseconds work, SteadyTime start, double rate);

  // From `at` on the speed is `rate`; the time up to `at` counts at the speed before. An `at`
  // before the previous change counts as that change's time (time is never integrated twice).
  void SetRate(SteadyTime at, double rate);

  // Work done by `now` (at most `work`), if the speed has not changed since the last SetRate.
  std::chrono::nanoseconds Done(SteadyTime now) const;
  bool Finished(SteadyTime now) const { return Done(now) >= work_; }
  // When the work is done if the speed stays as it is now.
  SteadyTime FinishAt() const;

  double rate() const { return rate_; }
  std::chrono::nanoseconds work() const { return work_; }

 private:
  std::chrono::nanoseconds work_;
  SteadyTime since_;    // the latest change of speed
  double done_ns_ = 0;  // work done by since_
  double rate_;
};

}  // namespace packrat::emulator
