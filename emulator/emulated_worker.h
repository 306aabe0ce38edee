// The serving loop of packrat-emulated-runtime: the same ring protocol as the real runtime's
// Worker (runtime/worker.h) — pop a batch from the segment's request ring, answer it on the
// completion ring — but the batch is not computed: it lasts the profile's L[t,b] under the
// node's contention (EmulatedCpus), times a jitter factor where one is asked for
// (latency_truth.h), and is answered with zero-filled outputs of the declared
// shapes. compute_ns is the wall time it lasted, as a real runtime reports.
//
// Batches are not topped up (layered batching is refused for emulated models by the config);
// a kBatchAllowTopUp flag is ignored.
//
// Failure policy: a malformed message is answered with an error completion and the loop goes
// on; a closed ring or a dead agent ends the loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "common/status.h"
#include "emulator/emulated_cpus.h"
#include "emulator/emulated_model.h"
#include "emulator/latency_truth.h"
#include "runtime/agent_link.h"
#include "shm/segment.h"

namespace packrat::emulator {

struct EmulatedWorkerOptions {
  pid_t agent_pid = 0;  // the loop ends when this process is no longer our parent (0: never)
  std::chrono::milliseconds poll_interval{500};  // how often an idle loop checks the agent
  std::chrono::microseconds idle_spin{5};        // polling before sleeping on the ring
  std::vector<int> cpus;                         // where its slices compute
  double jitter_cv = 0;  // each slice's latency times a lognormal of mean 1 and this CV
  uint64_t jitter_seed = 0;
};

class EmulatedWorker {
 public:
  // Does not take ownership; all three must outlive the worker.
  EmulatedWorker(shm::Segment* segment, const EmulatedModel* model, EmulatedCpus* cpus,
                 EmulatedWorkerOptions options);

  // Blocks serving batches until the ring is closed (OK) or the agent died (kUnavailable).
  Status Run();

  bool AgentAlive() const { return link_.AgentAlive(); }

 private:
  // Fills *done; false if the agent went away meanwhile (the loop ends).
  bool Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done);

  shm::Segment* segment_;
  const EmulatedModel* model_;
  EmulatedCpus* cpus_;
  EmulatedWorkerOptions options_;
  runtime::AgentLink link_;
  Jitter jitter_;  // the serving loop's thread only
};

}  // namespace packrat::emulator
