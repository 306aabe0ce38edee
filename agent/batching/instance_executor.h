// The seam between batching and execution: something that runs slices of batches. The real one
// is a packrat-runtime process (agent/pool/runtime_instance.h); tests use fakes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "agent/batching/inference_request.h"

namespace packrat {

// Rows [begin, begin + rows) of one request.
struct RowRange {
  std::shared_ptr<InferenceRequest> request;
  int64_t begin = 0;
  int64_t rows = 0;
};

// The rows one instance runs as one forward pass, in order.
struct WorkSlice {
  uint64_t batch_id = 0;
  int64_t rows = 0;
  std::vector<RowRange> ranges;
  // Runs once after every row of the slice was delivered or failed.
  std::function<void()> on_done;
  // Set when the slice is re-run after its instance died; a slice is retried at most once.
  bool retried = false;
};

// Layered batching (lbci-paper §3.3): an executor running a staged model asks, at a stage
// boundary of a running slice, whether queued rows may join it.
struct TopUpQuery {
  int64_t rows = 0;                     // N_d: rows the slice runs now
  int stages_done = 0;                  // k: stages 1..k have run
  int num_stages = 0;                   // x: stages of the model
  std::chrono::nanoseconds elapsed{0};  // t_done: how long the slice has been computing
  int64_t max_rows = 0;                 // room left in the slice
  // A request of the running slice: joining rows must be compatible with it (same non-batch
  // dims). Valid during the call.
  const InferenceRequest* like = nullptr;
};

// The answer: whole requests whose rows join the slice, in order.
struct TopUpGrant {
  std::vector<std::shared_ptr<InferenceRequest>> requests;
  int64_t rows = 0;
  // Do not ask again for this slice (rows joined, or the budget admits none now and later).
  bool final = false;
};

// Called on the executor's completion thread; must not block beyond short locks.
using TopUpSource = std::function<TopUpGrant(const TopUpQuery&)>;

class InstanceExecutor {
 public:
  virtual ~InstanceExecutor() = default;

  // Queues `slice` and returns at once (never waits for the runtime). The executor delivers or
  // fails every row of the slice exactly once, then runs slice.on_done, on any thread.
  virtual void Enqueue(WorkSlice slice) = 0;
  // The most rows one slice may carry (at least the instance's b in any plan that uses it).
  virtual int64_t batch_size() const = 0;
  // The most bytes of inputs one slice may carry, as GatherInputs lays them out (the runtime's
  // input slab); 0: no limit. Where rows vary in size (a -1 beyond the batch dim), fewer than
  // batch_size() rows may fit: the dispatcher cuts slices to fit (RowsThatFit).
  virtual uint64_t input_capacity() const { return 0; }
  // Slices queued or running; the dispatcher prefers instances with fewer.
  virtual size_t load() const = 0;
  // False once the executor cannot run slices any more (its runtime died and awaits its
  // replacement, or it stopped): the dispatcher then shares batches among the live ones, and
  // a slice still given to it is failed or retried by its owner. Short locks only.
  virtual bool alive() const { return true; }
};

}  // namespace packrat
