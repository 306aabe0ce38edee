// One client request on its way through batching and execution.
//
// Ownership: shared (std::shared_ptr) by the queue and then by every batch slice that carries
// some of its rows. Rows are finished by executors, possibly several at once from different
// completion threads; when the last row is finished the completion callback runs exactly once,
// on the thread that finished it, and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/tensor.h"
#include "common/mutex.h"
#include "common/status.h"

namespace packrat {

using SteadyTime = std::chrono::steady_clock::time_point;

class InferenceRequest {
 public:
  // Receives the final status and the request (outputs are valid when status is OK).
  using Callback = std::function<void(const Status&, InferenceRequest&)>;

  InferenceRequest(DecodedRequest decoded, Callback done, SteadyTime arrival);

  const DecodedRequest& decoded() const { return decoded_; }
  int64_t rows() const { return decoded_.rows; }
  SteadyTime arrival() const { return arrival_; }
  // When the request expires if still queued (it is then answered 504 and never executed);
  // nullopt = no timeout. Set before the request is shared.
  std::optional<SteadyTime> deadline() const { return deadline_; }
  void set_deadline(SteadyTime deadline) { deadline_ = deadline; }
  // Runs with the count each time rows are finished (delivered or failed), on the thread that
  // finished them, before the completion callback can run: a count of rows still in the system
  // that it decrements never includes rows whose client already has its answer (and may have
  // sent the next request). Must not block. Set before the request is shared.
  void set_rows_finished_observer(std::function<void(int64_t rows)> observer) {
    rows_finished_ = std::move(observer);
  }

  // When its first rows were dispatched in a batch (the end of its queueing); the first call
  // wins. Thread-safe.
  void MarkDispatched(SteadyTime t) {
    int64_t unset = 0;
    dispatched_ns_.compare_exchange_strong(unset, t.time_since_epoch().count(),
                                           std::memory_order_relaxed);
  }
  std::optional<SteadyTime> dispatched() const {
    const int64_t ns = dispatched_ns_.load(std::memory_order_relaxed);
    if (ns == 0) return std::nullopt;
    return SteadyTime(SteadyTime::duration(ns));
  }

  // True if both requests' inputs have equal non-batch dims, so their rows can share a batch.
  bool CompatibleWith(const InferenceRequest& other) const;

  // Rows [begin, begin + count) of this request were computed as rows [batch_row, ...) of
  // `outputs` (one view per model output, each with the batch as dim 0). Copies them into
  // this request's outputs (CopyRows), then counts them in (FinishRows: the callback runs
  // once every row is in). Thread-safe.
  void DeliverRows(int64_t begin, int64_t count, const std::vector<TensorView>& outputs,
                   int64_t batch_row);
  // DeliverRows in two steps: the copy, and then, once for the same rows, their count.
  void CopyRows(int64_t begin, int64_t count, const std::vector<TensorView>& outputs,
                int64_t batch_row);
  void FinishRows(int64_t count);
  // `count` rows could not be computed. The first error wins. Thread-safe.
  void FailRows(int64_t count, const Status& status);

  // The outputs, complete once the callback ran with OK. Not thread-safe before that.
  const std::vector<Tensor>& outputs() const { return outputs_; }

  // Lets go of the request's leases on its client's shared-memory regions (its inputs' and its
  // outputs'), so that a client holding its answer may unregister them at once. Call from the
  // completion callback, after the outputs were written, before the answer is sent; the inputs
  // and the outputs' regions must not be read afterwards.
  void ReleaseSharedMemory();

 private:
  DecodedRequest decoded_;  // changed only by ReleaseSharedMemory, once every row is finished
  const Callback done_;
  const SteadyTime arrival_;
  std::optional<SteadyTime> deadline_;
  std::function<void(int64_t)> rows_finished_;
  std::atomic<int64_t> rows_pending_;
  std::atomic<int64_t> dispatched_ns_{0};  // steady_clock ticks; 0 = not yet
  Mutex mu_;
  std::vector<Tensor> outputs_ GUARDED_BY(mu_);  // until rows_pending_ reaches 0
  Status status_ GUARDED_BY(mu_);
};

}  // namespace packrat
