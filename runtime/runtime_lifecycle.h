// The start and end every runtime process shares, packrat-runtime and the emulator's
// packrat-emulated-runtime alike: attaching to the segment the agent made for it, dying with
// the agent, recording a failed start in the segment, and the ready → stopped states around
// serving. The agent reads those states (and the failure text) from the segment header.
// Torch-free.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "shm/segment.h"

namespace packrat::runtime {

// Has the kernel kill this process when its parent dies, checks that the parent is still the
// agent `agent_pid` (0: no check; the agent forks from a thread as long-lived as itself, so the
// death signal comes only with the agent), and opens the segment `name`. kUnavailable if the
// agent is already gone; otherwise the error of opening the segment. Blocks only on the open.
StatusOr<std::unique_ptr<shm::Segment>> AttachToAgent(const std::string& name, pid_t agent_pid);

// A start-up failure: logs `status` and records it in `segment` (the agent reports it as the
// reason the runtime did not start). Returns 1, the runtimes' exit code for a failed start.
int FailStart(shm::Segment* segment, const Status& status);

// Marks this process `segment`'s ready runtime, runs `serve` (which blocks until the ring is
// closed or the agent is gone), then marks the runtime stopped; a `serve` error is logged as the
// reason for stopping. Returns 0, the exit code of an orderly shutdown.
int ServeUntilStopped(shm::Segment* segment, const std::function<Status()>& serve);

}  // namespace packrat::runtime
