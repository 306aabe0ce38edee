// A runtime process's side of its segment, shared by packrat-runtime's Worker and the
// emulator's EmulatedWorker: whether the agent that started it is still its parent, pushing a
// completion while the ring is full, and the serving loop over the request ring.
//
// Thread-safety: one thread (the runtime's serving loop). Torch-free.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>

#include "common/status.h"
#include "shm/segment.h"

namespace packrat::runtime {

class AgentLink {
 public:
  // `segment` is not owned and must outlive the link. `agent_pid` 0: the agent is never
  // considered gone. `poll_interval` (raised to 1 ms): how often a waiting call checks it.
  AgentLink(shm::Segment* segment, pid_t agent_pid, std::chrono::milliseconds poll_interval);

  bool AgentAlive() const;
  std::chrono::milliseconds poll_interval() const { return poll_interval_; }

  // Pushes `msg` on the completion ring, waiting while it is full. False if the agent is gone
  // or the ring closed.
  bool PushCompletion(const shm::CompletionMessage& msg) const;

  // Blocks serving batches: pops each (polling `idle_spin` before sleeping on the ring),
  // `execute` fills its completion (false: the agent went away meanwhile), pushes it. Ends OK
  // when the ring is closed or `execute` fails while the agent lives, kUnavailable when the
  // agent exited.
  Status Serve(std::chrono::microseconds idle_spin,
               const std::function<bool(const shm::BatchMessage&, shm::CompletionMessage*)>&
                   execute) const;

 private:
  shm::Segment* segment_;
  pid_t agent_pid_;
  std::chrono::milliseconds poll_interval_;
};

}  // namespace packrat::runtime
