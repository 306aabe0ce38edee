// Linux's idle scheduling class (SCHED_IDLE) for runtimes that start beside a serving set
// (reconfiguration.idle_start_s): the agent's launcher moves such a child to it before exec
// (LaunchSpec::idle_priority), so that its exec, model load and warm-up run only while the
// serving runtimes leave those CPUs idle; the agent moves it back to normal priority
// (SCHED_OTHER) at its limit or once starved (common/starvation_watch.h), the runtime itself
// once ready (runtime/runtime_main.cc). Measured on one CPU (2-vCPU AMD EPYC, two spinning
// threads): an idle thread beside a busy normal one ran at 0.4% of its speed alone and left the
// normal one 99%; beside one busy half of the time, at 54%. Policies are per thread; a new
// thread inherits its creator's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "common/status.h"

namespace packrat {

// Moves thread `tid` (0: the calling thread) to SCHED_IDLE / SCHED_OTHER; false with errno set.
// Async-signal-safe (a single system call): usable between fork and exec.
bool SetIdlePriority(pid_t tid);
bool SetNormalPriority(pid_t tid);

// Whether a thread of this process may come back from SCHED_IDLE to SCHED_OTHER: it needs
// CAP_SYS_NICE or an RLIMIT_NICE of 20. Tried on a throwaway thread, so the caller's priority
// never changes; a child exec'd by this process (same user, capabilities kept) may too.
bool MayLeaveIdlePriority();

// Every thread of process `pid` that is at SCHED_IDLE to SCHED_OTHER: the main thread first
// (it may be starting more), then all of /proc/PID/task, twice (a thread started meanwhile by
// one still idle is caught the second time). Threads that exit meanwhile are skipped; an
// error names one that could not be moved.
Status LeaveIdlePriority(pid_t pid);

// What StartRuntimeProcess samples of a starting runtime, from /proc/PID/stat: the CPU time of
// all its threads (utime + stime, in clock ticks: 10 ms on most kernels), and whether its main
// thread is runnable (state R: running or waiting for a CPU; not blocked on I/O or a lock).
// nullopt where the process is gone.
struct SchedSample {
  std::chrono::nanoseconds cpu{0};
  bool runnable = false;
};
std::optional<SchedSample> ReadSchedSample(pid_t pid);

}  // namespace packrat
