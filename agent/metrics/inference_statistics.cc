#include "agent/metrics/inference_statistics.h"

#include <algorithm>

namespace packrat::metrics {
namespace {

uint64_t Ns(std::chrono::nanoseconds d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, d.count()));
}

}  // namespace

void InferenceStatistics::AtomicDuration::Add(uint64_t n, std::chrono::nanoseconds took) {
  count.fetch_add(n, std::memory_order_relaxed);
  ns.fetch_add(n * Ns(took), std::memory_order_relaxed);
}

InferenceStatistics::Duration InferenceStatistics::AtomicDuration::Read() const {
  return Duration{count.load(std::memory_order_relaxed), ns.load(std::memory_order_relaxed)};
}

void InferenceStatistics::RecordAnswer(bool ok, std::chrono::nanoseconds took) {
  (ok ? success_ : fail_).Add(1, took);
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  last_inference_ms_.store(static_cast<uint64_t>(now.count()), std::memory_order_relaxed);
}

void InferenceStatistics::RecordQueued(std::chrono::nanoseconds waited) { queue_.Add(1, waited); }

void InferenceStatistics::RecordExecution(int64_t rows, int64_t requests,
                                          std::chrono::nanoseconds input,
                                          std::chrono::nanoseconds infer,
                                          std::chrono::nanoseconds output) {
  const auto n = static_cast<uint64_t>(std::max<int64_t>(1, requests));
  execution_count_.fetch_add(1, std::memory_order_relaxed);
  inference_count_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, rows)),
                             std::memory_order_relaxed);
  compute_input_.Add(n, input);
  compute_infer_.Add(n, infer);
  compute_output_.Add(n, output);
  MutexLock lock(&mu_);
  BatchFigures& b = batches_[rows];
  b.batch_size = static_cast<uint64_t>(rows);
  for (auto [d, took] : {std::pair{&b.compute_input, input}, std::pair{&b.compute_infer, infer},
                         std::pair{&b.compute_output, output}}) {
    d->count += 1;
    d->ns += Ns(took);
  }
}

InferenceStatistics::Snapshot InferenceStatistics::Read() const {
  Snapshot s;
  s.last_inference_ms = last_inference_ms_.load(std::memory_order_relaxed);
  s.inference_count = inference_count_.load(std::memory_order_relaxed);
  s.execution_count = execution_count_.load(std::memory_order_relaxed);
  s.success = success_.Read();
  s.fail = fail_.Read();
  s.queue = queue_.Read();
  s.compute_input = compute_input_.Read();
  s.compute_infer = compute_infer_.Read();
  s.compute_output = compute_output_.Read();
  MutexLock lock(&mu_);
  for (const auto& [size, figures] : batches_) s.batches.push_back(figures);
  return s;
}

}  // namespace packrat::metrics
