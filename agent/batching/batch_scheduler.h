// The thread that turns one model's queue into dispatched batches (Triton's dynamic batcher
// shape): it sleeps until a batch is due and the instances have capacity, then dispatches.
//
// Thread-safety: Submit() may be called from any thread (the HTTP I/O threads); it never blocks
// beyond a short mutex. When the request completes a batch that is due at once (B rows, or no
// batching delay) and the instances have capacity, Submit dispatches it on the caller's thread,
// saving a thread hop; otherwise the scheduler thread dispatches when the batch is due.
// Stop() fails every request still queued with kUnavailable.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/batching/batch_aggregator.h"
#include "agent/batching/dispatcher.h"

namespace packrat {

class BatchScheduler {
 public:
  // `dispatcher` is not owned; the scheduler must be stopped before it is destroyed.
  BatchScheduler(BatchAggregator::Options options, Dispatcher* dispatcher);
  ~BatchScheduler();  // Stop()s

  // Queues a request; kResourceExhausted when the queue is full, kUnavailable after Stop().
  Status Submit(std::shared_ptr<InferenceRequest> request);
  // Wakes the thread: capacity may have been freed (called by the dispatcher's batch-done hook).
  void Notify();
  // Refuses new requests and dispatches every queued one at once (no waiting for B); returns
  // when the queue is empty or at `deadline`. Dispatched batches may still be running.
  void Drain(SteadyTime deadline);
  // Stops the thread; queued requests are failed with kUnavailable. Idempotent.
  void Stop();

  int64_t queued_rows() const;

 private:
  void Loop();

  Dispatcher* const dispatcher_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  BatchAggregator aggregator_;  // guarded by mu_
  std::condition_variable drained_cv_;
  bool stop_ = false;      // guarded by mu_
  bool draining_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace packrat
