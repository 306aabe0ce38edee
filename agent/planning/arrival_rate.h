// ArrivalRate: the rate at which rows arrive, measured over a sliding span of time.
//
// The owner reports the running total of rows that have arrived (a counter that only grows) at
// the times it samples the load; Over(span) is the slope of that counter across the newest
// samples that cover `span`. A plain moving window, not an EWMA: a decision that compares the
// rate with a plan's capacity wants the mean over a known stretch of time (a Poisson stream of
// 15 rows/s counts ±18% over 2 s and ±8% over 10 s), not over whatever the last few samples
// weigh most.
//
// Time: no clock and no thread; callers pass `now`. Samples older than `horizon` (counted back
// from the newest) are dropped, so memory is bounded by horizon / sample period.
//
// Thread-safety: none; one owner (the model's control thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace packrat {

class ArrivalRate {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  // `horizon` bounds the longest span Over() can answer; > 0.
  explicit ArrivalRate(Duration horizon);

  // Records that `total` rows had arrived by `now`. A sample not later than the newest one, or a
  // total below the newest one's, is ignored (the counter restarted: call Restart() instead).
  void Sample(SteadyTime now, int64_t total);

  // Rows per second between the newest sample and the newest one at least `span` before it;
  // nullopt while the samples do not yet cover `span` (or span exceeds the horizon).
  std::optional<double> Over(Duration span) const;

  // The highest rate over any stretch of at least `window` (between two samples, the shortest
  // such) that ends at a sample within the last `span`, and at least `before` before the newest
  // one: the peak a plan must absorb, where Over(span) is the mean (`before` > 0: the peak the
  // arrivals had reached earlier). Nullopt while no stretch of `window` fits.
  std::optional<double> PeakOver(Duration window, Duration span,
                                 Duration before = Duration::zero()) const;

  // Where the arrivals have stepped away from `baseline` rows/s, the rate since the step.
  //   - Where: of the stretches ending at the newest sample and at most `max_span` long, the one
  //     whose own rate is likeliest against the baseline (the Poisson log-likelihood ratio; it
  //     grows with each sample after a step and falls with each before it, so it is the stretch
  //     since the step), provided its count differs from baseline × its length by more than
  //     `sigmas` standard deviations of a Poisson count (√(baseline × seconds), at least 1).
  //   - The rate since: over that stretch less its oldest interval (which may hold the step
  //     partway), once that is at least `min_span` long, moved one standard deviation of its
  //     count (√count) toward the baseline: what the arrivals show with some confidence.
  // So a large step shows about `min_span` plus a sample period after it, at its full size, and a
  // small one once it is beyond noise. Nullopt: no step, or one too recent to measure.
  // Limits: the noise is that of a Poisson count of rows; requests of k rows each spread √k
  // times more, and the likeliest of up to horizon / sample period stretches is tested, so a
  // caller with many-row requests should ask for more `sigmas`.
  std::optional<double> Shift(double baseline, Duration min_span, Duration max_span,
                              double sigmas) const;

  // How long the samples have run by `now`: since the first one after construction or the last
  // Restart() (not only the horizon's worth kept); zero before any.
  Duration Seen(SteadyTime now) const { return first_ ? now - *first_ : Duration::zero(); }

  // Forgets every sample (as after construction).
  void Restart() {
    samples_.clear();
    first_.reset();
  }

 private:
  Duration horizon_;
  std::deque<std::pair<SteadyTime, int64_t>> samples_;  // oldest first
  std::optional<SteadyTime> first_;                     // of the samples since Restart()
};

}  // namespace packrat
