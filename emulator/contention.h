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
//   * A thread at idle priority (SCHED_IDLE: a shadow runtime loading beside a serving set,
//     reconfiguration.idle_start_s) runs on a CPU only while no normal thread is busy there: a
//     CPU with a busy normal thread gives it kIdlePriorityShare of its speed, and takes none
//     from the busy one. Measured here (2-vCPU AMD EPYC, two spinning threads pinned to one
//     CPU): the idle one ran at 0.0040 of its speed alone, the normal one at 0.99; two normal
//     ones at 0.52 each. (CFS weighs SCHED_IDLE 3 against 1024 for nice 0: 0.003.)
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

inline constexpr double kIdlePriorityShare = 0.004;

// The instance's speed relative to its profile, in (0, 1].
double ContentionRate(const ContentionView& view, double neighbour_slowdown);

// The same for an instance at idle priority, which is not counted busy: `view.max_busy` and
// `view.busy_cpus` count the normal threads of others only. kIdlePriorityShare (times the
// neighbour slowdown) where one of its CPUs has a busy thread; otherwise as a normal instance
// alone on its CPUs.
double IdleContentionRate(const ContentionView& view, double neighbour_slowdown);

}  // namespace packrat::emulator
