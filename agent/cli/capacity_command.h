// `packrat capacity`: the throughput each plan of a profile sustains at a p99 latency target,
// simulated (BatchingSimulator) on the profile, for the peers bench/run measures.
//
//   packrat capacity --profile FILE.csv [--threads T] --batch B[,B...] --p99-ms MS
//                    [--max-delay-us US] [--requests N] [--json]
//
// For each batch size B, three plans serve single-row Poisson arrivals batched as the agent
// batches them (a batch is cut at B rows or after max_delay, at most two in flight, shared by
// the dispatcher in proportion to each instance's b):
//   fat       ⟨1,T,B⟩, one instance with every thread;
//   per_core  ⟨⌈B/p⌉,1,p⟩ with p = ⌈B/T⌉ rows each, one thread an instance (bench/run's);
//   packrat   the optimizer's plan for T and B.
// Each plan's throughput is MaxRate: the highest rows/s whose simulated p99 stays within the
// target, never above the plan's capacity. With --json, one object per B and line:
//   {"threads":16,"batch":8,"p99_target_ms":1000,"peers":[{"peer":"fat","config":"<1,16,8>",
//    "batch_ms":49.631,"rows_per_s":161.2},...]}
// "rows_per_s" is null for a plan whose latencies the profile lacks at that thread count.
//
// A projection, not a measurement: the profile times each instance alone, and the simulation
// leaves out what instances cost each other (the paper measures real multi-instance runs
// 12-15% below their prediction) and what a switch of plans costs under load.
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace packrat {

int RunCapacityCommand(std::span<const std::string_view> args, std::ostream& out,
                       std::ostream& err);

}  // namespace packrat
