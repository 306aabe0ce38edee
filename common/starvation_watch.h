// When a start at idle priority (common/idle_priority.h) is starved: a serving set that leaves
// its CPUs no idle time would hold a shadow runtime back until the idle limit, delaying the
// switch for nothing. `progress` is what the start got: for a real runtime its CPU time plus
// the time it was not runnable (blocked on I/O is not starved; StartRuntimeProcess samples
// /proc/PID/stat every 100 ms), for an emulated one its work done. Over every window of
// `window`, a start whose progress was under `min_share` of it is starved and goes on at
// normal priority.
//
// With the defaults (1 s, 2%): beside serving runtimes that are never idle (the idle class
// gets ~0.4% then, emulator/contention.h) the start is starved after a window or two (the CPU
// time is counted in 10-ms ticks); beside ones idle 5% of the time it is not, and takes its
// time at no cost to them (the limit bounds it).
//
// Pure: the caller gives every time and the progress. A value type; not thread-safe.
#pragma once

#include <chrono>

#include "common/clock.h"

namespace packrat {

class StarvationWatch {
 public:
  static constexpr std::chrono::milliseconds kWindow{1000};
  static constexpr double kMinShare = 0.02;

  explicit StarvationWatch(SteadyTime start, std::chrono::nanoseconds window = kWindow,
                           double min_share = kMinShare);

  // `progress`: since the start, cumulative. True from the end of the first whole window
  // whose progress was under min_share of it; a window with enough starts the next one.
  bool Starved(SteadyTime now, std::chrono::nanoseconds progress);

 private:
  std::chrono::nanoseconds window_;
  double min_share_;
  SteadyTime window_start_;
  std::chrono::nanoseconds done_at_window_start_{0};
  bool starved_ = false;
};

}  // namespace packrat
