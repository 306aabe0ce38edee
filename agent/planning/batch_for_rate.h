// BatchForRate: the batch size to move to when rows arrive faster than the serving plan runs
// them; StepUpBatch: how far the estimator's step up is worth taking; BacklogBatch: how many
// queued rows one batch may take while the plan catches up.
//
// The batch-size estimator (batch_size_estimator.h) reads B from the queue depth, which under
// overload measures the backlog, not the load: it grows for as long as the plan falls behind,
// and its window takes seconds to follow. The arrival rate says directly which plans can keep
// up: the plan for b serves at most capacity(b) = b rows per batch latency. Moving to the
// smallest b whose plan would be at most `max_utilization` busy gives the lowest batch latency
// that still drains the queue, with headroom for the bursts of a random arrival process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

namespace packrat {

// Rows per second the plan for batch size b serves with every batch full (b over its predicted
// batch latency); nullopt where there is no plan for b.
using CapacityFn = std::function<std::optional<double>(int64_t b)>;

// A switch costs seconds: a plan that serves less than this much more than the current one does
// not repay it.
inline constexpr double kBatchForRateMinGain = 1.05;
// Simulated p99s within this factor of the lowest count as the lowest: a step down gives up
// capacity only for a p99 lower by more than the simulation's sampling noise.
inline constexpr double kNearLowestP99 = 1.05;
// Capacity flattens out with b while batch latency keeps growing: plans within this share of
// the most capacity count as the most.
inline constexpr double kBatchForRateNearMost = 0.95;

// Among the powers of two above `current_b`, and `max_b` itself, up to `max_b`: the smallest b
// whose plan would run at most `max_utilization` busy at `rate` rows/s. Where none would, the
// smallest b whose capacity is within kBatchForRateNearMost of the highest, if the highest
// exceeds capacity(current_b) by kBatchForRateMinGain. Nullopt where no b qualifies.
// `current_b` 0: every b, and the highest is taken whatever it serves (capacity(0) is asked
// and may be nullopt; the overload path compares with the serving set itself).
// `capacity` is called O(log max_b) times.
std::optional<int64_t> BatchForRate(double rate, int64_t current_b, int64_t max_b,
                                    double max_utilization, const CapacityFn& capacity);

// The simulated p99 (ms) of single-row requests on the plan for batch size b at the rate
// arriving now (BatchingSimulator), for the current b the serving plan's; nullopt where there
// is no plan for b or no known rate.
using P99Fn = std::function<std::optional<double>(int64_t b)>;

// The overload path's batch size (Autoscaler rule 1): among the powers of two up to `max_b`,
// and `max_b` itself, the plans that serve more than `floor` rows/s. Of those that keep up with
// `rate` beyond chance (KeepsUpBeyondChance over `window_s`), the smallest b whose simulated p99
// at the rate, `p99(b)`, is within kNearLowestP99 of the lowest of theirs (an unknown p99 ranks
// last); where none keeps up, the smallest b within kBatchForRateNearMost of the most capacity
// of every b, where that serves more than `floor`. Nullopt otherwise.
// The simulation weighs a queue near capacity against longer batches, which a utilisation bar
// cannot: where capacity is flat in b, the smallest b run 0.8 busy may be the largest one,
// chosen for a fraction of a percent of capacity, and every row then waits for its whole batch.
std::optional<int64_t> OverloadBatch(double rate, double window_s, int64_t max_b, double floor,
                                     const CapacityFn& capacity, const P99Fn& p99);

// Whether a plan serving `capacity` rows/s keeps up with `rate` rows/s measured over `window_s`
// seconds beyond chance: its count over the span exceeds the arrivals' by kOverloadSigmas
// Poisson deviations (AbovePoissonNoise), so that the rate's own noise does not overload it.
bool KeepsUpBeyondChance(double rate, double window_s, double capacity);

// The estimator's step up from `current_b` towards its estimate `wanted_b`, only as far as
// capacity still grows: among the powers of two above `current_b`, and `wanted_b` itself, the
// smallest b whose capacity is within kBatchForRateNearMost of the highest, if the highest
// exceeds capacity(current_b) by kBatchForRateMinGain; nullopt (stay at current_b) otherwise.
// The queue depth the estimate comes from grows with any backlog, and past the batch where a
// model's throughput flattens a larger batch serves no more rows per second but makes every
// row wait for a longer batch.
std::optional<int64_t> StepUpBatch(int64_t current_b, int64_t wanted_b, const CapacityFn& capacity);

// Rows per second over stretches of `ms` milliseconds; nullopt before that much history. The
// overload path asks for the mean over the newest stretch, the estimator's step down for the
// peak over the stretches within its span (ArrivalRate::PeakOver).
using RateOverFn = std::function<std::optional<double>(int64_t ms)>;

// Whether a plan serving `capacity` rows/s may replace one serving `serving`: one that serves at
// least as much may; a smaller one only where the recent peak arrivals (`peak_over`) would not
// have overloaded it by the overload path's bar (OverloadedRate over `window_ms`, twice and four
// times it, against `max_utilization` of its capacity). Rows in the system shrink once a plan
// keeps up, and the rate drops between bursts: without this, a move that gives up capacity
// would meet the next burst without it. The estimator's step down and the plan at a rate both
// ask it (StepDownBatch, Autoscaler rules 2a and 2b).
bool PeakAllows(double capacity, double serving, int64_t window_ms, double max_utilization,
                const RateOverFn& peak_over);

// The estimator's step down from `current_b` towards its estimate `wanted_b`, only as far as the
// recent arrivals allow. The candidates are `wanted_b` and the powers of two above it, below
// `current_b`, whose plans would not have met the overload path's bar (OverloadedRate over
// `window_ms`, twice and four times it, against `max_utilization` of capacity(b)) at the peak
// arrivals of `peak_over`: fewer rows in the system may only mean that the serving plan keeps
// up, and a step to a plan that a recent peak would have overloaded moves B straight back up;
// the same bar keeps the step down from refusing what the overload path would have let
// through. A candidate that serves at least the serving plan's capacity(current_b) passes
// whatever the peak: the peak overloads the serving plan as much (capacity is not monotone in b:
// a smaller B's plan may serve more than a larger one's). Among them, the smallest b whose
// p99(b) is within kNearLowestP99 of the lowest of theirs and the serving plan's, p99(current_b)
// (the smallest candidate where p99 knows any of them not); nullopt (stay at current_b) where
// none passes, or where the serving plan's own p99 is within it: a step down gives up capacity,
// and only a lower p99 pays for that (a step to plans that serve the rate as well meets the
// next rise with less, and a move of its own costs). Where the estimate's own plan fails the
// bar, a larger b's may not (its instances may be thinner and serve more). And a plan that
// passes may still queue its rows longer than a larger one's, which the p99 comparison sees.
//
// Capacity for a burst at a small latency price (`reserve`, AutoscalerOptions::burst_reserve_ms):
// among the passing candidates and the serving plan, each b's plan of the most rows/s from a
// backlog whose p99 is within reserve.slack_ms of the lowest p99 above (reserve.most_within:
// its own, or another plan for b). The serving plan stays (nullopt) where it is within the
// slack, the choice above would serve kBatchForRateMinGain less from a backlog
// (reserve.burst), and no plan within it serves kBurstReserveMinGain more; else the plan of the
// most is taken where it serves kBurstReserveMinGain more than the choice above and the serving
// plan — the lowest p99 among those within kBatchForRateNearMost of the most. Runtimes that
// absorb a burst by cutting larger batches need no switch, and a switch under a burst costs
// seconds of queue. *for_burst (if given) says whether the reserve decided.
// A move for a burst's sake must absorb this much more: between plans that close, the
// switch's own seconds weigh more (docs/configuration.md, "Policy keys and constants").
inline constexpr double kBurstReserveMinGain = 1.15;
struct BurstReserve {
  double slack_ms = 0;  // 0: no reserve
  // Rows/s that the plan for b (current_b: the serving plan) serves from a backlog.
  CapacityFn burst;
  // Among b's plans (current_b: the serving one) whose p99 is at most `ceiling_ms`, the one of
  // the most rows/s from a backlog: its rows/s and p99 (ms); nullopt where none is within.
  std::function<std::optional<std::pair<double, double>>(int64_t b, double ceiling_ms)> most_within;
};
std::optional<int64_t> StepDownBatch(int64_t current_b, int64_t wanted_b, int64_t window_ms,
                                     double max_utilization, const RateOverFn& peak_over,
                                     const CapacityFn& capacity, const P99Fn& p99,
                                     const BurstReserve& reserve = {}, bool* for_burst = nullptr);

// The most rows worth cutting into one batch from a backlog, on the serving instances: from
// `current_b` up through larger sizes (below) and `max_b`, each step taken only while it
// serves kBatchForRateMinGain more rows per second than the largest batch taken so far
// (sizes without a known capacity are skipped). Each step doubles the wait of every row in
// the batch and of every row queued behind it; capacity creeps up far slower (a fraction of a
// percent per doubling near the top), so a "within 5% of the most" rule would cut slices many
// times longer for a gain of a few percent.
// Sizes are the powers of two and `current_b` doubled, redoubled, ...: where the instance
// count is no power of two, a power of two covers the instances unevenly. The search ends at
// a multiple of `current_b` that gains too little; any other size that does is passed over
// (an uneven size may serve less than the even one below it). `current_b` where nothing serves
// more.
int64_t BacklogBatch(int64_t current_b, int64_t max_b, const CapacityFn& capacity);

// How many standard deviations above a plan's capacity the arrivals of one window must be to
// count as overload: arrivals are random (Poisson: a window expecting m rows sees m ± √m), and a
// move costs seconds of switching, so a burst that a plan absorbs must not trigger one.
inline constexpr double kOverloadSigmas = 2.0;

// True if `arrived` rows in `seconds` are more than a plan serving `capacity` rows/s could have
// been expected to see if it were exactly fully busy: arrived > m + kOverloadSigmas·√m with
// m = capacity·seconds (AbovePoissonNoise, √m at least 1); any row exceeds a capacity of 0. At 60%
// utilisation a false alarm takes a 4σ burst; a real overload of 15% is found within a few windows
// of 8 s at 15 rows/s.
bool ArrivalsExceedCapacity(double arrived, double seconds, double capacity);

// The arrival rate over `window_ms`, or over twice or four times it (a smaller excess takes
// longer to tell from chance), whichever first exceeds `capacity` (ArrivalsExceedCapacity);
// nullopt if none does or the history is too short. The overload path asks it twice: against
// what the serving set runs fully busy, and, for a move that starts no runtime, against
// max_utilization of that.
std::optional<double> OverloadedRate(int64_t window_ms, double capacity,
                                     const RateOverFn& rate_over);

}  // namespace packrat
