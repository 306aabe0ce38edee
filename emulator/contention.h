// The contention model of emulated runtimes: how fast an instance computes, relative to its
// profile, while other emulated threads share its CPUs. Pure arithmetic.
//
//   * A CPU shared by k busy emulated threads runs each at 1/k of its speed (a fair scheduler).
//   * An instance advances at the speed of its slowest CPU: the threads of an intra-op
//     parallel region meet at a barrier after every operator, so all wait for the last one.
//   * Optionally, busy neighbours cost memory bandwidth and last-level cache: with a share f of
//     the node's other CPUs busy the instance runs 1 + neighbour_slowdown·f times slower
//     (packrat-paper §A measured thin instances side by side 12-15% slower than alone). Leave
//     it at 0 for profiles taken beside busy neighbours (the agent's own profiler does that),
//     which already hold the effect.
#pragma once

#include <cstdint>

namespace packrat::emulator {

struct ContentionView {
  uint32_t max_busy = 1;   // the most busy emulated threads on one of the instance's CPUs,
                           // its own included (>= 1 while it computes; 0 reads as 1)
  uint32_t busy_cpus = 0;  // CPUs of the node with a busy thread, its own included
  int own_cpus = 1;        // CPUs the instance computes on
  int num_cpus = 1;        // CPUs of the node
};

// The instance's speed relative to its profile, in (0, 1].
double ContentionRate(const ContentionView& view, double neighbour_slowdown);

}  // namespace packrat::emulator
