// The batching policy of one model: a bounded FIFO of requests that is cut into batches of B
// rows, or fewer when the oldest request has waited max_delay; with `max_rows` above B, a batch
// cut while more than B rows wait takes up to max_rows of them (the backlog runs in larger
// slices instead of waiting for one B-row batch after another).
//
// Pure logic with the time passed in, so tests drive it with a hand-moved clock; the thread
// that calls it is BatchScheduler's. Not thread-safe: the caller serialises all calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "agent/batching/inference_request.h"
#include "common/status.h"

namespace packrat {

struct Batch {
  uint64_t id = 0;
  int64_t rows = 0;
  std::vector<std::shared_ptr<InferenceRequest>> requests;
};

class BatchAggregator {
 public:
  struct Options {
    int64_t target_rows = 1;                 // B
    std::chrono::microseconds max_delay{0};  // longest wait of the oldest request
    int64_t max_queue_rows = 4096;           // beyond this, Enqueue fails
    int64_t max_rows = 0;                    // most rows of one batch; B where smaller
  };

  explicit BatchAggregator(Options options);

  // Queues a request. kResourceExhausted if it would push the queue beyond max_queue_rows;
  // kInvalidArgument if it alone has more rows than that (it could never be queued).
  Status Enqueue(std::shared_ptr<InferenceRequest> request);

  // The next batch, if one is due at `now` for instances with room for `room` rows at the
  // plan's b (Dispatcher::Room; > 0): min(B, room) rows are queued, or the oldest request
  // arrived max_delay ago. A batch takes whole requests from the front while they fit in
  // max(B, max_rows), scaled by room / B where room is below B, and have the same non-batch
  // dims as the first; a first request larger than that goes alone (the dispatcher cuts it
  // across instances).
  std::optional<Batch> Poll(SteadyTime now, int64_t room = std::numeric_limits<int64_t>::max());

  // When the front request's max_delay expires; nullopt when the queue is empty.
  std::optional<SteadyTime> NextDeadline() const;
  // The earliest request deadline (InferenceRequest::deadline) in the queue, if any.
  std::optional<SteadyTime> NextExpiry() const;
  // Removes and returns the queued requests whose deadline is at or before `now`, in order.
  std::vector<std::shared_ptr<InferenceRequest>> TakeExpired(SteadyTime now);

  // Removes requests from the front, in order, while `admit(request, rows)` says yes, `rows`
  // being the rows taken so far including this request's (layered top-ups). Stops at the first
  // refusal.
  std::vector<std::shared_ptr<InferenceRequest>> TakeFront(
      const std::function<bool(const InferenceRequest& request, int64_t rows)>& admit);

  // Removes and returns every queued request (shutdown).
  std::vector<std::shared_ptr<InferenceRequest>> TakeAll();

  int64_t queued_rows() const { return queued_rows_; }
  // When the request at the front of the queue arrived; nullopt when the queue is empty.
  std::optional<SteadyTime> OldestArrival() const {
    if (queue_.empty()) return std::nullopt;
    return queue_.front()->arrival();
  }
  size_t queued_requests() const { return queue_.size(); }
  int64_t target_rows() const { return options_.target_rows; }
  // A new B for the batches cut from now on (reconfiguration).
  void set_target_rows(int64_t rows) { options_.target_rows = std::max<int64_t>(1, rows); }
  // A new max_rows for the batches cut from now on (0: B).
  void set_max_rows(int64_t rows) { options_.max_rows = std::max<int64_t>(0, rows); }

 private:
  Options options_;
  std::deque<std::shared_ptr<InferenceRequest>> queue_;
  int64_t queued_rows_ = 0;
  size_t with_deadline_ = 0;  // queued requests that have a deadline
  uint64_t next_batch_id_ = 1;
};

}  // namespace packrat
