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

// How long the main thread of process `pid` has waited on a run queue, runnable but not
// running (/proc/PID/schedstat, ns); nullopt where the kernel keeps no such count
// (CONFIG_SCHED_INFO off) or the process is gone.
std::optional<std::chrono::nanoseconds> RunQueueWait(pid_t pid);

}  // namespace packrat
