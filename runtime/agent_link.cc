#include "runtime/agent_link.h"

#include <unistd.h>

#include <algorithm>

namespace packrat::runtime {

AgentLink::AgentLink(shm::Segment* segment, pid_t agent_pid,
                     std::chrono::milliseconds poll_interval)
    : segment_(segment),
      agent_pid_(agent_pid),
      // 0 would turn every idle wait into a busy loop.
      poll_interval_(std::max(poll_interval, std::chrono::milliseconds(1))) {}

bool AgentLink::AgentAlive() const { return agent_pid_ == 0 || getppid() == agent_pid_; }

bool AgentLink::PushCompletion(const shm::CompletionMessage& msg) const {
  while (true) {
    const Status pushed = segment_->completions().Push(msg, poll_interval_);
    if (pushed.ok()) return true;
    if (pushed.code() != StatusCode::kDeadlineExceeded) return false;
    if (!AgentAlive()) return false;
  }
}

Status AgentLink::Serve(
    std::chrono::microseconds idle_spin,
    const std::function<bool(const shm::BatchMessage&, shm::CompletionMessage*)>& execute) const {
  segment_->requests().set_spin(idle_spin);
  shm::BatchMessage msg;
  shm::CompletionMessage done;
  while (true) {
    const Status popped = segment_->requests().Pop(&msg, poll_interval_);
    if (popped.code() == StatusCode::kDeadlineExceeded) {
      if (!AgentAlive()) return Unavailable("agent exited");
      continue;
    }
    if (!popped.ok()) return Status::Ok();  // ring closed: orderly shutdown
    if (!execute(msg, &done) || !PushCompletion(done)) {
      return AgentAlive() ? Status::Ok() : Unavailable("agent exited");
    }
  }
}

}  // namespace packrat::runtime
