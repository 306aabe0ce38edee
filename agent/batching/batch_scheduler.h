// The thread that turns one model's queue into dispatched batches (Triton's dynamic batcher
// shape): it sleeps until a batch is due and the instances have capacity, then dispatches.
//
// Batches are cut for the room the instances have (Dispatcher::Room): B rows, or fewer where
// only some instances have room, so that an instance that frees up takes rows at once.
//
// Thread-safety: Submit() may be called from any thread (the HTTP I/O threads); it never blocks
// beyond a short mutex. When the request completes a batch that is due at once (B rows, or
// rows for all the room there is, or no batching delay), Submit dispatches it on the caller's
// thread, saving a thread hop; otherwise the scheduler thread dispatches when the batch is due.
// Stop() fails every request still queued with kUnavailable.
//
// The dispatcher can be swapped while serving (reconfiguration): batches cut after
// SwapDispatcher() returns go to the new one, and none is still being handed to the old one.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "agent/batching/batch_aggregator.h"
#include "agent/batching/dispatcher.h"
#include "common/mutex.h"

namespace packrat {

class BatchScheduler {
 public:
  BatchScheduler(BatchAggregator::Options options, std::shared_ptr<Dispatcher> dispatcher);
  ~BatchScheduler();  // Stop()s

  // Queues a request; kResourceExhausted when the queue is full, kUnavailable after Stop().
  Status Submit(std::shared_ptr<InferenceRequest> request);
  // Wakes the thread: room may have been freed (the dispatcher's on_room hook).
  void Notify();
  // Refuses new requests and dispatches every queued one at once (no waiting for B); returns
  // when the queue is empty or at `deadline`. Dispatched batches may still be running.
  void Drain(SteadyTime deadline);
  // Stops the thread; queued requests are failed with kUnavailable. Idempotent.
  void Stop();

  // Makes `next` the dispatcher, `target_rows` the batch size B and `max_rows` the most rows
  // of a batch cut from a backlog (BatchAggregator::Options; 0: B). Waits for dispatches in
  // progress to the old dispatcher to return; after that nothing reaches the old one.
  void SwapDispatcher(std::shared_ptr<Dispatcher> next, int64_t target_rows, int64_t max_rows);

  // Takes whole requests from the front of the queue for a running batch (layered top-up), see
  // BatchAggregator::TakeFront. Never waits beyond the queue's lock; `admit` runs under it and
  // must be quick.
  std::vector<std::shared_ptr<InferenceRequest>> TakeFront(
      const std::function<bool(const InferenceRequest& request, int64_t rows)>& admit);

  int64_t queued_rows() const;
  // When the oldest queued request arrived (not yet in a batch); nullopt when none is queued.
  std::optional<SteadyTime> oldest_queued_arrival() const;

  // Called with the queued rows whenever they change (under the queue's lock: must be quick and
  // must not call back into the scheduler). Set before requests arrive.
  void set_queue_observer(std::function<void(int64_t rows)> observer) {
    queue_observer_ = std::move(observer);
  }

 private:
  void Loop() EXCLUDES(mu_);

  // Lock order: dispatch_mu_, then mu_. Dispatch() runs under a shared dispatch_mu_ (never
  // under mu_); SwapDispatcher takes it exclusively.
  std::shared_mutex dispatch_mu_;
  mutable Mutex mu_;
  // Written under both locks, read under either: not expressible as GUARDED_BY, so the
  // analysis does not check it (SwapDispatcher is its only writer).
  std::shared_ptr<Dispatcher> dispatcher_;
  CondVar cv_;
  BatchAggregator aggregator_ GUARDED_BY(mu_);
  CondVar drained_cv_;
  std::function<void(int64_t)> queue_observer_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool draining_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace packrat
