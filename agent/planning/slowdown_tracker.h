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
//     runtimes starting or draining on their CPUs (BERT-like one-thread runtimes measured 1.25
//     while the fat runtime started beside them, then served at 1.08);
//   - a thread count's estimate counts only from `min_slices` ratios on: until then it is taken
//     as the slowest thread count measured enough (one not served yet may run beside others
//     that interfere more: optimism would move to a plan that falls behind), or as its profile
//     while none is.
//
// A measured thread count may be faster than its profile (below 1) and counts so: the profile
// times each instance beside fully busy neighbours, serving below capacity leaves them idle
// part of the time (ResNet-50 on 2 cores at 10.5 rows/s: one-thread slices at 0.85-0.95 of
// the profile, two-thread ones at 0.99-1.05). Clamping it to 1 would rank a thin plan, once
// served, against the fat one on the profile alone, and it ran at a lower p99 in three paired
// probes of three where the profile said the opposite. It counts down to `fastest` (0.8 by
// default): a profile more than that much too slow is stale, not a speed to plan on (the
// tests' rewritten profiles time microsecond models at hundreds of ms).
//
// An unmeasured thread count is taken as the slowest measured one, and below 1 only where that
// includes a count with more threads: a fat instance's speed against its profile is the
// machine's drift alone, which speeds thinner ones too (they may gain more, from idle
// neighbours); a thin one's may be the idle neighbours, which a fatter one lacks (ResNet-50:
// one-thread slices at 0.85-0.95, two-thread ones at 0.99-1.05; Inception-v3: 0.83-0.95 and
// 0.90-0.94). Held at 1 beside a fat plan served at 0.926, Inception-v3's thin plan for B = 2
// counted 8% slower than the fat one for B = 8, and the overload path moved to the fat plan as
// the only one within 5% of the most capacity (batch_for_rate.h).
//
// That pessimism costs where the profile is optimistic for thin instances only: on a real
// 16-core Xeon BERT-like's one-thread instances served 1.44x slower than their profile (beside
// 15 busy neighbours) while the fat instance ran at its profile; counted 1.44x slow too, the fat
// plan never looked better and the policy never served it, so never learned its speed (Packrat
// failed at 126 rows/s where fat passed). Exploring() is the estimate a policy that must learn
// plans on: measured counts as Get(); one not served yet as its neighbours would make it —
// where the nearest measured count ran slower than its profile, that excess is taken to come
// from its busy neighbours (packrat-paper §A: thin instances side by side 12-15% slower than
// alone; the 16-core Xeon: BERT-like's one-thread instances 1.44x, the fat one, without
// neighbours, 1.0) and scaled to the other count's share of neighbours, (T − t) / (T − 1) of
// the node's other CPUs in a plan that fills the node: 1 + k·(T − t)/(T − 1). Else (nothing
// measured, or measured at most as slow as profiled: drift, not neighbours) at most 1. A guess
// to be served and measured, never a speed to keep planning on: the emulator's neighbour model
// (emulate.neighbour_slowdown) is the same line, so an emulated run confirms only the policy.
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
  // The slowdown of `threads` threads: the measured one, at least `fastest`; not measured, the
  // slowest measured one, at least `fastest` if a larger count is measured, else at least 1.
  double Get(int threads) const;
  // Whether `threads` has min_slices ratios (counted outside switches).
  bool Measured(int threads) const;
  // Get(threads) where `threads` is measured; else the neighbour-scaled guess above for a
  // node of `budget` CPUs (at least `fastest`), or at most 1 where none applies.
  double Exploring(int threads, int budget) const;

 private:
  struct Estimate {
    double value = 1;
    int64_t slices = 0;
  };
  // The estimate of `threads` where it has min_slices ratios; null otherwise.
  const Estimate* MeasuredLocked(int threads) const REQUIRES(mu_);
  double GetLocked(int threads) const REQUIRES(mu_);

  const double alpha_;
  const int64_t min_slices_;
  const double fastest_;
  mutable Mutex mu_;
  std::map<int, Estimate> estimates_ GUARDED_BY(mu_);
  int switching_ GUARDED_BY(mu_) = 0;
  SteadyTime last_switch_end_ GUARDED_BY(mu_){};
};

}  // namespace packrat
