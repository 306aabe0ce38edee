// A model of this directory's batching pipeline (BatchAggregator, BatchScheduler, Dispatcher)
// run on simulated time: single-row requests arrive as a Poisson process, batches are cut as
// the scheduler cuts them, for the room the instances have, and shared between the instances
// with room as the dispatcher shares them, and each slice runs for the latency the caller
// gives. It answers what a closed-form model cannot: how a plan's requests fare at a rate
// below its capacity, where batches are partial and thin instances run their own small slices
// side by side.
//
// Which plan's requests fare better at a rate depends on the profile: one fat instance runs a
// partial batch at once, thin ones split it; the simulation, not the full-batch latency,
// tells them apart (docs/architecture.md).
//
// Deterministic: the arrivals are drawn once, from a fixed seed, at construction, and every
// Run scales the same draws to its rate, so two plans are compared on the same arrivals and a
// decision does not flip with the draw. Thread-safe: Run is const.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace packrat {

class BatchingSimulator {
 public:
  // One instance of a plan: its intra-op threads and its b (its share of a batch, and the most
  // rows of one slice).
  struct Instance {
    int threads = 1;
    int64_t batch = 1;
  };
  struct Options {
    int64_t target_rows = 1;                 // B: a batch is cut once B rows wait...
    std::chrono::microseconds max_delay{0};  // ...or the oldest row has waited this long
    int64_t max_rows = 0;                    // most rows of a batch; B where smaller
    int max_inflight_batches = 2;            // slices an instance holds (Dispatcher::Room)
  };
  // Request latencies, arrival to answer (queueing included), in ms.
  struct Result {
    double p50_ms = 0;
    double p99_ms = 0;
    double mean_ms = 0;
    double mean_batch_rows = 0;  // rows per batch cut
    // A batch's latency is its longest slice's run time (queueing on a busy instance left
    // out), as the profile's L[t,b] of a full batch: what a plan's batch-latency limit
    // (batching.max_batch_latency_ms) is judged on at a known rate.
    double mean_batch_ms = 0;
  };
  // How long a slice of `rows` rows runs on an instance of `threads` threads, in ms (> 0).
  using SliceLatency = std::function<double(int threads, int64_t rows)>;

  // Draws `requests` arrivals (at least 100) from `seed`.
  explicit BatchingSimulator(int requests = 5000, uint64_t seed = 1);

  // Serves the arrivals at `rate` rows/s (> 0) on `instances` (not empty). A rate beyond the
  // instances' capacity builds a queue that grows over the run: the latencies then grow with
  // `requests` and are only good for telling that the plan falls behind. O(requests ×
  // instances).
  Result Run(const std::vector<Instance>& instances, const Options& options, double rate,
             const SliceLatency& slice_ms) const;

  // Rows/s that `instances` serve running full slices back to back: Σ b / slice_ms(t, b).
  static double Capacity(const std::vector<Instance>& instances, const SliceLatency& slice_ms);

  // The throughput of `instances` at a p99 latency target: the highest rate (rows/s) whose
  // simulated p99 stays within `p99_ms`, found by bisection to within 0.5%, and never above
  // Capacity() (beyond it the queue grows without bound, whatever a finite run's p99 says).
  // 0 where even a trickle misses the target (a slice alone takes longer). On the same
  // arrivals the p99 rises with the rate, though not strictly (batches cut by max_delay), so
  // this is where it crosses the target, to within the bisection.
  double MaxRate(const std::vector<Instance>& instances, const Options& options, double p99_ms,
                 const SliceLatency& slice_ms) const;

 private:
  // Run's figures from each row's latency (reordered), the batches cut and the sum of their
  // longest slices (ms); infinite latencies where no row ran.
  static Result Summarize(std::vector<double>* latencies, int64_t batches, double batch_ms_sum);

  std::vector<double> unit_arrivals_;  // arrival times (s) of a rate of one row per second
};

}  // namespace packrat
