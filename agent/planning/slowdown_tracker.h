// How much slower a model's runtimes serve than its profile predicts, per thread count.
//
// The profile times one instance alone; serving runs it beside others (on shared caches and
// memory bandwidth), beside the agent's own threads, on a machine whose speed drifts. Each
// slice a runtime computes gives one ratio, compute time / the profile's latency for its rows
// and threads; per thread count the tracker keeps the mean of the first 1/alpha ratios and an
// EWMA (weight alpha) from there. The planner scales predicted latencies by Get().
//
// Two kinds of ratio are not the plan's speed and are left out:
//   - slices that ran while the model switched instance sets (Begin/EndSwitch): they ran beside
//     runtimes starting or draining on their CPUs;
//   - a thread count's first ratios: it counts from `min_slices` ratios on.
//
// A thread count is not judged by one other's measurements: until it is measured it counts at
// its profile (1). Whatever made the serving runtimes slow — their neighbours, a busy host, a
// queue — says little about a shape that has not run, and carrying it over makes every plan
// look as slow as the serving one, so no move appears to gain. A shape the profile flatters
// is found out by serving it: the policy's observed-overload rule (autoscaler.h, rule 0) moves
// on once it falls behind, judging it at its measured speed.
// Once two or more thread counts have been measured slower than their profile, the slowdown
// is the node's (its load, a profile from a faster machine), not one shape's: a thread count
// not yet measured counts at the least of theirs (a bounded prior, never below 1). Without it,
// each move under overload goes to the next shape the profile flatters, finds it as slow, and
// moves again, restarting the set each time.
//
// A measured thread count may be faster than its profile (below 1) and counts so, down to
// `fastest` (0.8 by default): the profile times each instance beside fully busy neighbours, and
// serving below capacity leaves them idle part of the time; a profile more than that much too
// slow is stale, not a speed to plan on.
//
// Thread-safety: all methods may be called from any thread (runtimes' completion threads
// record, the control thread switches and reads).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/mutex.h"

namespace packrat {

class SlowdownTracker {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  explicit SlowdownTracker(double alpha = 0.1, int64_t min_slices = 8, double fastest = 0.8)
      : alpha_(alpha), min_slices_(min_slices), fastest_(fastest) {}

  // One slice of `threads` threads that began computing at `began`: its compute time over the
  // profile's prediction. Ignored if it overlaps a switch.
  void Record(int threads, double ratio, SteadyTime began);
  // A switch of instance sets begins / ended at `now`. Switches may overlap (counted).
  void BeginSwitch();
  void EndSwitch(SteadyTime now);
  // The slowdown of `threads` threads: the measured one, at least `fastest`; not measured, 1.
  double Get(int threads) const;
  // Whether `threads` has min_slices ratios (counted outside switches).
  bool Measured(int threads) const;

 private:
  struct Estimate {
    double value = 1;
    int64_t slices = 0;
  };
  // The estimate of `threads` where it has min_slices ratios; null otherwise.
  const Estimate* MeasuredLocked(int threads) const REQUIRES(mu_);

  const double alpha_;
  const int64_t min_slices_;
  const double fastest_;
  mutable Mutex mu_;
  std::map<int, Estimate> estimates_ GUARDED_BY(mu_);
  int switching_ GUARDED_BY(mu_) = 0;
  SteadyTime last_switch_end_ GUARDED_BY(mu_){};
};

}  // namespace packrat
