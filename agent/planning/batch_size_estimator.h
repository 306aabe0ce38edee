// BatchSizeEstimator: the online batch-size estimator of the Packrat paper (§3.8).
//
// Two-level smoothing of the request queue depth, so that a reconfiguration (seconds of work,
// §5.2.2) happens only when the workload has really changed and never flip-flops on noise:
//   1. every sample period the owner reports the current queue depth Q; the estimator keeps an
//      exponentially weighted moving average  Q̂_x = α·Q + (1 − α)·Q̂_{x−1}  and floors it to a
//      power of two, clamped to [min_batch, max_batch]: the estimate B̂_x;
//   2. every reconfiguration timeout, Decide() takes the mode of the last n estimates, B̃, and
//      returns it if it differs from the batch size B currently configured (and B has fallen
//      below Options::keep_share of the window, a hysteresis we add).
//
// Time. The class has no clock and no thread: every call that depends on time takes `now`, so a
// driver thread passes steady_clock::now() and tests pass hand-made time points.
//   - Samples: the first one is always taken; a later one only if at least `sample_period` has
//     passed since the previous *taken* sample (earlier calls are dropped and return false), so
//     the window of n estimates spans at least n · sample_period whatever the caller's rate. A
//     driver that waits with wait_until(next_sample_time()) on a steady clock is never early.
//   - Decisions: on a fixed grid  t0 + k · reconfiguration_timeout  (t0 = the first taken
//     sample, k ≥ 1). Decide() between two grid points returns nullopt and changes nothing;
//     grid points missed by a late caller are skipped, not replayed.
//
// Invariants:
//   - ewma_ ≥ 0; it equals the first queue depth after the first sample (no bias toward 0).
//   - window_ holds at most options.window estimates, each a power of two in [min, max];
//     counts_[log2(b)] is the number of entries equal to b.
//   - next_decision_ > the time of the last Decide() that reached a grid point.
//
// Thread-safety: none; one owner (the model's batcher or reconfiguration thread) calls it.
// Nothing blocks; every call is O(1) (the mode scans at most 63 counters).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"

namespace packrat {

class BatchSizeEstimator {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  // The paper names the parameters (α, n, the sampling of the queue depth, the reconfiguration
  // timeout) but gives no values; the defaults below are ours, chosen from the timings it reports.
  struct Options {
    // EWMA weight of the newest queue depth, in (0, 1]. 0.2 gives the average a time constant of
    // about 5 samples (0.5 s): it follows a rate step within a second or two while single bursts
    // move it little; the mode over the window does the rest of the smoothing.
    double alpha = 0.2;
    // n: how many estimates the mode is taken over. 50 samples = 5 s of history.
    int64_t window = 50;
    // How often the owner samples the queue depth.
    Duration sample_period = std::chrono::milliseconds(100);
    // How often the smoothed batch size is compared with the current one. A reconfiguration takes
    // about 5 s (paper §5.2.2, Figure 6); with a 10 s timeout the 5 s window used by a decision
    // starts after the previous reconfiguration has finished, and the server spends at most about
    // half of its time reconfiguring even under a workload that keeps changing. An agent takes
    // kSamplesPerDecision sample periods (twice the window) for it.
    Duration reconfiguration_timeout = std::chrono::seconds(10);
    static constexpr int64_t kSamplesPerDecision = 100;
    // Bounds of the estimate; both powers of two. 1024 = 2^10, the largest profiled batch of the
    // paper's example (§3.2, n = 10).
    int64_t min_batch = 1;
    int64_t max_batch = 1024;
    // Hysteresis, our addition to the paper (0 disables it): Decide() keeps the current B while
    // it still makes up at least this share of the window (0.1 = 5 of 50 estimates), even if
    // another size is the mode. With a queue depth that sits on a power-of-two boundary (32 ± 4)
    // the plain mode swaps 16 and 32 every few minutes (0.25 still did, rarely); after a real
    // change the current B leaves the 5 s window within ~2 s, so steps are followed as fast as
    // without it. In [0, 1).
    double keep_share = 0.1;
  };

  // InvalidArgument naming the first bad field, or OK.
  static Status Validate(const Options& options);

  // Validates `options` and builds an estimator.
  static StatusOr<BatchSizeEstimator> Create(const Options& options);

  // `options` must be valid (asserted); use Create() for options from a config file.
  explicit BatchSizeEstimator(const Options& options);

  // Reports the queue depth at `now` (negative depths count as 0). Returns true if the sample was
  // taken (EWMA and window updated), false if it came less than sample_period after the previous
  // taken sample, or before it in time, and was dropped.
  bool Sample(SteadyTime now, int64_t queue_depth);

  // The EWMA rounded to the nearest whole request, then floored to a power of two and clamped to
  // [min_batch, max_batch]; min_batch before any sample. The rounding is our addition to the
  // paper's formula: an average that rises toward a new depth 2^k approaches it from below and
  // would, floored as is, read 2^(k−1) for ~90 samples (α = 0.2) instead of ~19, which after a
  // step up would cost a second, needless reconfiguration.
  int64_t Estimate() const;

  // Every reconfiguration timeout (see the class comment): the mode B̃ of the last n estimates,
  // returned only if it differs from `current_b`. Nullopt between grid points, before the first
  // sample, while fewer than n estimates have been taken, and while `current_b` still holds
  // keep_share of the window. Ties in the mode prefer `current_b` (no reconfiguration), then the
  // smaller batch size.
  std::optional<int64_t> Decide(SteadyTime now, int64_t current_b);
  // What Decide(now, current_b) would return, without advancing the grid.
  std::optional<int64_t> Proposed(SteadyTime now, int64_t current_b) const;

  // Forgets every sample: the EWMA, the window and the decision grid start again with the next
  // Sample(), as after construction. For a plan set from outside (the management API): the load
  // seen under the old plan says nothing about the new one.
  void Restart();

  // The mode of the window with Decide()'s tie-break, without the timing or the hysteresis;
  // nullopt until the window holds n estimates.
  std::optional<int64_t> Smoothed(int64_t current_b) const;

  // The moving average of the queue depth (0 before any sample).
  double ewma() const { return ewma_; }
  // Number of samples taken so far.
  int64_t samples() const { return samples_; }
  // When the next sample will be taken / the next decision is due; nullopt before any sample.
  std::optional<SteadyTime> next_sample_time() const;
  std::optional<SteadyTime> next_decision_time() const;
  const Options& options() const { return options_; }

 private:
  Options options_;
  double ewma_ = 0.0;
  int64_t samples_ = 0;
  std::optional<SteadyTime> last_sample_;
  SteadyTime next_decision_{};
  std::vector<int64_t> window_;  // ring buffer of the last n estimates
  size_t next_slot_ = 0;         // where the next estimate goes once window_ is full
  std::array<int64_t, 63> counts_{};
};

// The largest power of two not above `x` (1 for x < 2): the largest B the estimator estimates
// for a model whose batching.max_batch is x, and so the largest B every policy plans for.
int64_t FloorPowerOfTwo(int64_t x);

}  // namespace packrat
