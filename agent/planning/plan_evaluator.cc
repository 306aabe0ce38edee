#include "agent/planning/plan_evaluator.h"

#include <algorithm>
#include <limits>

#include "agent/planning/loaded_latency.h"

namespace packrat {

std::vector<int> ThreadCounts(const std::vector<InstanceGroup>& groups) {
  std::vector<int> threads;
  for (const InstanceGroup& g : groups) {
    threads.insert(threads.end(), static_cast<size_t>(std::max(0, g.count)), g.threads);
  }
  std::sort(threads.begin(), threads.end());
  return threads;
}

int64_t TargetRows(const std::vector<InstanceGroup>& groups) {
  int64_t rows = 0;
  for (const InstanceGroup& g : groups) rows += int64_t{g.count} * g.batch;
  return rows;
}

PlanEvaluator::PlanEvaluator(const Optimizer& optimizer, const BatchingSimulator& simulator,
                             PlanEvaluatorOptions options, SlowdownFn slowdown)
    : optimizer_(optimizer),
      simulator_(simulator),
      options_(options),
      slowdown_(std::move(slowdown)) {}

double PlanEvaluator::PredictedLatencyMs(const Plan& plan) const {
  return LoadedLatencyMs(plan, profile(), std::numeric_limits<double>::infinity(),
                         [this](int threads) { return Slowdown(threads); });
}

double PlanEvaluator::Capacity(const Plan& plan) const {
  const double full = PredictedLatencyMs(plan);
  return full > 0 ? static_cast<double>(plan.batch) * 1e3 / full
                  : std::numeric_limits<double>::infinity();
}

bool PlanEvaluator::TooSlow(double latency_ms) const {
  const double limit = options_.max_batch_latency_ms;
  return limit > 0 && latency_ms > limit;
}

std::optional<double> PlanEvaluator::CapacityOn(const std::vector<int>& threads, int64_t b) const {
  auto plan = optimizer_.SolveOnInstances(threads, static_cast<int>(b));
  if (!plan.ok()) return std::nullopt;
  const double latency = PredictedLatencyMs(*plan);
  if (latency <= 0 || TooSlow(latency)) return std::nullopt;
  return static_cast<double>(b) * 1e3 / latency;
}

double PlanEvaluator::SliceMs(int threads, int64_t rows, double fallback_ms) const {
  return profile().InterpolatedLatency(threads, rows).value_or(fallback_ms) * Slowdown(threads);
}

BatchingSimulator::Result PlanEvaluator::Simulate(const Plan& plan, double rate) const {
  std::vector<BatchingSimulator::Instance> instances;
  for (const InstanceGroup& g : plan.groups) {
    for (int i = 0; i < g.count; ++i) instances.push_back({g.threads, g.batch});
  }
  BatchingSimulator::Options batching;
  batching.target_rows = std::max(1, plan.batch);
  batching.max_delay = options_.max_delay;
  batching.max_inflight_batches = options_.max_inflight_batches;
  return simulator_.Run(instances, batching, rate, [&](int threads, int64_t rows) {
    return SliceMs(threads, rows, plan.latency_ms);
  });
}

std::optional<double> PlanEvaluator::MaxRate(const std::vector<InstanceGroup>& groups,
                                             int64_t batch, double p99_ms) const {
  std::vector<BatchingSimulator::Instance> instances;
  for (const InstanceGroup& g : groups) {
    if (!profile().InterpolatedLatency(g.threads, g.batch)) return std::nullopt;
    for (int i = 0; i < g.count; ++i) instances.push_back({g.threads, g.batch});
  }
  if (instances.empty()) return std::nullopt;
  BatchingSimulator::Options batching;
  batching.target_rows = std::max<int64_t>(1, batch);
  batching.max_delay = options_.max_delay;
  batching.max_inflight_batches = options_.max_inflight_batches;
  return simulator_.MaxRate(instances, batching, p99_ms, [&](int threads, int64_t rows) {
    return SliceMs(threads, rows, 0);  // every thread count is profiled (checked above)
  });
}

}  // namespace packrat
