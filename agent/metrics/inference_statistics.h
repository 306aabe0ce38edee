// InferenceStatistics: one model's cumulative figures as the statistics extension of Triton's
// v2 protocol reports them (GET /v2/models[/{m}[/versions/{v}]]/stats, gRPC ModelStatistics):
//   success, fail      requests answered, and their time from receipt to answer
//   queue              requests dispatched, and their time from receipt to their first batch
//   compute_input      per request of each executed slice: the slice's copy into the
//                      runtime's slab
//   compute_infer      ... the slice's compute, as its runtime timed it
//   compute_output     ... the copy of the slice's outputs out of the slab to its requests
//   execution_count    slices executed (decode steps for a generative model)
//   inference_count    rows executed
//   batch_stats        per slice size: the slices and their input, compute and output times
//   last_inference     the last answer, in ms since the Unix epoch
// A request's rows split over several slices count once per slice in the compute figures (as
// Triton counts each request of a batch).
//
// Thread-safety: every member from any thread; the per-request ones are lock-free, the
// per-slice one takes a lock for its batch size's entry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include "common/mutex.h"

namespace packrat::metrics {

class InferenceStatistics {
 public:
  struct Duration {
    uint64_t count = 0;
    uint64_t ns = 0;
  };
  struct BatchFigures {
    uint64_t batch_size = 0;
    Duration compute_input, compute_infer, compute_output;
  };
  struct Snapshot {
    uint64_t last_inference_ms = 0;  // 0: none yet
    uint64_t inference_count = 0;
    uint64_t execution_count = 0;
    Duration success, fail, queue, compute_input, compute_infer, compute_output;
    std::vector<BatchFigures> batches;  // ascending batch size
  };

  // A request was answered, `ok` or not, `took` after its receipt.
  void RecordAnswer(bool ok, std::chrono::nanoseconds took);
  // A request's rows went into their first batch `waited` after its receipt.
  void RecordQueued(std::chrono::nanoseconds waited);
  // A slice of `rows` rows of `requests` requests ran: copied in, computed, copied out.
  void RecordExecution(int64_t rows, int64_t requests, std::chrono::nanoseconds input,
                       std::chrono::nanoseconds infer, std::chrono::nanoseconds output);

  Snapshot Read() const;

 private:
  struct AtomicDuration {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void Add(uint64_t n, std::chrono::nanoseconds took);
    Duration Read() const;
  };

  std::atomic<uint64_t> last_inference_ms_{0};
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  AtomicDuration success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  mutable Mutex mu_;
  std::map<int64_t, BatchFigures> batches_ GUARDED_BY(mu_);
};

}  // namespace packrat::metrics
