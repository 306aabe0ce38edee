// How long a plan's batches take when rows arrive below its capacity.
//
// A plan for batch size B runs full batches only when rows arrive at least as fast as it serves
// them. Below that, batches are cut as the instances free up, and each carries the rows that
// arrived while the one before ran: fewer than B, and shorter than the profile's L[t,B]. A row
// waits for at most one such batch and then runs in the next, so a latency objective sees the
// latency of these batches, well below L[t,B] at a moderate rate. This closed form waits for each
// batch to end before the next is cut; with two batches in flight they are shorter still, so the
// agent judges its latency limit (batching.max_batch_latency_ms) at a rate on simulated batches
// (BatchingSimulator::Result::mean_batch_ms) for batch models, on these for decoders.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "agent/planning/optimizer.h"
#include "agent/planning/profile.h"

namespace packrat {

// The rows per batch of a plan for batch size `b` at `rate` rows/s: the fixed point of
// n = ⌈rate · latency_ms(n) / 1000⌉ between 1 and b, reached from b downwards (at or above the
// plan's capacity, b). `latency_ms(n)` is the plan's batch latency for n rows and must not fall
// as n grows; it is called at most b times.
int64_t LoadedBatchRows(double rate, int64_t b, const std::function<double(int64_t)>& latency_ms);

// The batch latency of `plan` at `rate` rows/s: at LoadedBatchRows, each group taking its
// share of a batch in proportion to its b (as the dispatcher cuts), its latency interpolated in
// `profile` (Profile::InterpolatedLatency) and multiplied by `slowdown(threads)`; the slowest
// group's. A group without profiled points counts at plan.latency_ms.
double LoadedLatencyMs(const Plan& plan, const Profile& profile, double rate,
                       const std::function<double(int threads)>& slowdown);

// The optimizer's plan for B is the best for B full rows; below capacity another plan for B
// may serve the rows of a rate better (thin instances split the few rows of a partial batch
// among them, each at its own slower speed, where one fat instance runs them all at once).
// Returns the plan for `batch` rows on identical instances
// (k of ⌊threads/k⌋ threads each, one candidate per distinct thread count;
// Optimizer::SolveOnInstances) with the lowest `latency_at_rate` (what the caller judges a
// plan by at `rate`: LoadedLatencyMs, or a simulation of its requests), lower than `best`'s,
// among those whose full batches serve `rate` at most `max_utilization` busy (a plan that
// saves on partial batches must still ride out a burst); nullopt where none is. Full batches
// take each group's profiled latency times `slowdown(threads)`. O(√threads) SolveOnInstances
// and latency_at_rate calls.
std::optional<Plan> FasterAtRate(const Optimizer& optimizer, int threads, int batch,
                                 const Plan& best, double rate, double max_utilization,
                                 const std::function<double(int threads)>& slowdown,
                                 const std::function<double(const Plan& plan)>& latency_at_rate);

// Where capacity comes first (full batches, or a rate `best` cannot serve max_utilization busy,
// as the caller judges): among the same candidates as FasterAtRate (identical instances per
// distinct thread count), the plan for `batch` rows with the most capacity (batch over its
// full-batch latency at `slowdown`) if that exceeds best's by more than `min_gain` (a factor);
// nullopt otherwise. With one slowdown for every thread count the optimizer's plan has the most
// capacity already; measured slowdowns that differ by thread count make another plan's larger
// (thin instances measured slower than profiled beside busy neighbours, a fat one as
// profiled).
std::optional<Plan> MoreCapacity(const Optimizer& optimizer, int threads, int batch,
                                 const Plan& best, double min_gain,
                                 const std::function<double(int threads)>& slowdown);

// Capacity for a burst (AutoscalerOptions::burst_reserve_ms): among `best` and the same
// candidates as FasterAtRate (identical instances per distinct thread count) whose
// `latency_at_rate` is at most `ceiling_ms`, the one whose `burst` (rows/s its runtimes serve
// from a backlog, as the caller counts it) is the most — the lowest latency_at_rate among those
// within `near_most` (a share) of the most; nullopt where none is within the ceiling. A plan
// runs the rate at no higher a latency than the ceiling, so it serves the rate.
struct BurstPlan {
  Plan plan;
  double latency_ms = 0;  // latency_at_rate
  double burst = 0;       // rows/s from a backlog
};
std::optional<BurstPlan> MostBurstWithin(
    const Optimizer& optimizer, int threads, int batch, const Plan& best, double ceiling_ms,
    double near_most, const std::function<double(const Plan& plan)>& latency_at_rate,
    const std::function<double(const Plan& plan)>& burst);

}  // namespace packrat
