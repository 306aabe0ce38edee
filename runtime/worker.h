// The serving loop of one packrat-runtime process: pop a batch from the segment's request ring,
// run it, write outputs into the slot's output slab, push a completion.
//
// Failure policy: a malformed message or a model error is answered with an error completion
// and the loop goes on; a closed ring or a dead agent ends the loop.
#pragma once

#include <sys/types.h>

#include <chrono>

#include "common/status.h"
#include "runtime/model_runner.h"
#include "shm/segment.h"

namespace packrat::runtime {

struct WorkerOptions {
  pid_t agent_pid = 0;  // the loop ends when this process is no longer our parent
  std::chrono::milliseconds poll_interval{500};  // how often an idle loop checks the agent
};

class Worker {
 public:
  // Does not take ownership; both must outlive the Worker.
  Worker(shm::Segment* segment, ModelRunner* runner, WorkerOptions options);

  // Blocks serving batches until the ring is closed (OK) or the agent died (kUnavailable).
  Status Run();

 private:
  bool AgentAlive() const;
  // Checks `msg` against the segment and wraps its tensors; errors name what is wrong.
  Status Unpack(const shm::BatchMessage& msg, std::vector<RawTensor>* inputs) const;
  void Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done);

  shm::Segment* segment_;
  ModelRunner* runner_;
  WorkerOptions options_;
  std::vector<RawTensor> inputs_;   // reused across batches
  std::vector<RawTensor> outputs_;  // reused across batches
};

}  // namespace packrat::runtime
