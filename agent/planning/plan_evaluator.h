// PlanEvaluator: what a plan does on a model's profile — its batch latency at full batches, the
// rows per second it serves, how single-row requests fare on it at an arrival rate (simulated:
// BatchingSimulator), the highest rate it serves within a p99 target, and whether its batches
// break the batch-latency limit. One implementation for the agent's autoscaling policy
// (autoscaler.h) and for `packrat capacity`.
//
// Every latency is the profile's L[t,b] (interpolated between profiled b) times the slowdown of
// its thread count: how much slower than the profile the model's runtimes serve
// (SlowdownTracker); 1 everywhere for a projection from the profile alone.
//
// Thread-safety: const and stateless besides its references; the optimizer, simulator and
// slowdown function must outlive it and be thread-safe (they are).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "agent/planning/batching_simulator.h"
#include "agent/planning/instance_group.h"
#include "agent/planning/optimizer.h"

namespace packrat {

// How much slower than the profile instances of `threads` threads serve (>= 0.25).
using SlowdownFn = std::function<double(int threads)>;

// The speed, against its profile, of a runtime whose CPUs a starting runtime's threads share:
// the kernel splits a CPU evenly between two runnable threads (the emulator's contention model
// does the same). A set more busy than this falls behind while runtimes start beside it, and
// its batches take 1 / kSharedCpuSpeed as long meanwhile. The one place the policy prices a
// start beside busy runtimes (Autoscaler, rule 3).
inline constexpr double kSharedCpuSpeed = 0.5;

struct PlanEvaluatorOptions {
  // The batching the agent applies (batching.max_delay_us, max_inflight_batches).
  std::chrono::microseconds max_delay{2000};
  int max_inflight_batches = 2;
  // batching.max_batch_latency_ms: plans whose batches take longer are too slow; 0 = no limit.
  double max_batch_latency_ms = 0;
};

class PlanEvaluator {
 public:
  // `slowdown` empty: 1 for every thread count.
  PlanEvaluator(const Optimizer& optimizer, const BatchingSimulator& simulator,
                PlanEvaluatorOptions options, SlowdownFn slowdown = {});

  const Optimizer& optimizer() const { return optimizer_; }
  const Profile& profile() const { return optimizer_.profile(); }
  const PlanEvaluatorOptions& options() const { return options_; }
  double Slowdown(int threads) const { return slowdown_ ? slowdown_(threads) : 1.0; }

  // A plan's batch latency with every batch full: its slowest group's profiled latency for its
  // b at its thread count's slowdown (a group the profile lacks counts at plan.latency_ms).
  double PredictedLatencyMs(const Plan& plan) const;
  // Rows/s a plan serves with full batches: B over PredictedLatencyMs (infinite for 0 ms).
  double Capacity(const Plan& plan) const;
  // Whether a batch latency is beyond the batch-latency limit.
  bool TooSlow(double latency_ms) const;
  // Rows/s that instances of `threads` threads (one entry per instance) serve in batches of `b`
  // (Optimizer::SolveOnInstances); nullopt where no cover of b exists or it is TooSlow().
  std::optional<double> CapacityOn(const std::vector<int>& threads, int64_t b) const;

  // Single-row requests arriving at `rate` rows/s on `plan`, batched as the agent batches them
  // (B = plan.batch, max_delay, max_inflight_batches). About a millisecond.
  BatchingSimulator::Result Simulate(const Plan& plan, double rate) const;
  double SimulatedP99Ms(const Plan& plan, double rate) const { return Simulate(plan, rate).p99_ms; }

  // The highest rate of single-row requests that `groups` serve at B = `batch` with a simulated
  // p99 within `p99_ms` (BatchingSimulator::MaxRate); nullopt where the profile lacks one of
  // the groups' thread counts.
  std::optional<double> MaxRate(const std::vector<InstanceGroup>& groups, int64_t batch,
                                double p99_ms) const;

 private:
  // A slice's latency for the simulator: interpolated, times the slowdown; `fallback_ms` where
  // the profile lacks the thread count.
  double SliceMs(int threads, int64_t rows, double fallback_ms) const;

  const Optimizer& optimizer_;
  const BatchingSimulator& simulator_;
  const PlanEvaluatorOptions options_;
  const SlowdownFn slowdown_;
};

// The instances' thread counts, one entry per instance, ascending.
std::vector<int> ThreadCounts(const std::vector<InstanceGroup>& groups);

// Σ count·batch.
int64_t TargetRows(const std::vector<InstanceGroup>& groups);

}  // namespace packrat
