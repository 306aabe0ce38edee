// The serving loop of one packrat-runtime process: pop a batch from the segment's request ring,
// run it, write outputs into the slot's output slab, push a completion.
//
// Staged models run stage by stage and report each stage's time. For a batch the agent marked
// kBatchAllowTopUp, the worker asks after each stage but the last whether more rows may join
// (layered batching, lbci-paper §3.4): it pushes a kTopUpQuery completion and waits for the
// one answer on the top-up ring. Rows granted run through the stages done so far and join the
// batch. It stops asking once rows joined or the answer was final (the budget admits none);
// after an empty queue it asks again at the next boundary.
//
// Failure policy: a malformed message or a model error is answered with an error completion
// and the loop goes on; a closed ring or a dead agent ends the loop.
#pragma once

#include <sys/types.h>

#include <chrono>

#include "common/status.h"
#include "runtime/agent_link.h"
#include "runtime/model_runner.h"
#include "shm/segment.h"

namespace packrat::runtime {

struct WorkerOptions {
  pid_t agent_pid = 0;  // the loop ends when this process is no longer our parent
  // How often an idle loop checks the agent; between checks it sleeps on the ring's futex.
  // Values below 1 ms are raised to it (0 would turn every idle wait into a busy loop).
  std::chrono::milliseconds poll_interval{500};
  // How long the loop polls for the next batch before it sleeps on the ring's futex: a batch
  // that comes within it is picked up without a wake-up (tens of µs on a VM), at the price of
  // that much CPU after each batch.
  std::chrono::microseconds idle_spin{5};
};

class Worker {
 public:
  // Does not take ownership; both must outlive the Worker.
  Worker(shm::Segment* segment, ModelRunner* runner, WorkerOptions options);

  // Blocks serving batches until the ring is closed (OK) or the agent died (kUnavailable).
  Status Run();

  const WorkerOptions& options() const { return options_; }

 private:
  // Checks `msg` against the segment and wraps its tensors; errors name what is wrong.
  Status Unpack(const shm::BatchMessage& msg, std::vector<RawTensor>* inputs) const;
  // Fills *done; false if the agent went away meanwhile (the loop ends).
  bool Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done);
  // Runs a staged model's batch stage by stage, asking for top-ups if the batch allows it.
  // False if the agent went away.
  bool ExecuteStaged(const shm::BatchMessage& msg, shm::CompletionMessage* done, Status* status);
  // Asks the agent for rows after a stage; joins what it grants. Sets *keep_asking.
  // False if the agent went away.
  bool TopUp(const shm::BatchMessage& msg, std::chrono::steady_clock::time_point start,
             bool* keep_asking, Status* status);

  shm::Segment* segment_;
  ModelRunner* runner_;
  WorkerOptions options_;
  AgentLink link_;
  std::vector<RawTensor> inputs_;   // reused across batches
  std::vector<RawTensor> joined_;   // reused across top-ups
  std::vector<RawTensor> outputs_;  // reused across batches
};

}  // namespace packrat::runtime
