// Where an `instances: auto` model's latency profile L[t,b] and first plan come from, and the
// CPUs it plans for.
#pragma once

#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/model/profiling_progress.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/profile.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"

namespace packrat {

// The threads `model` may plan for: the node's budget (0 without an allocator), within the
// model's share where it has one (model repository, node partition), at most auto_threads.
int ThreadBudgetFor(const ModelConfig& model, const ResourceAllocator* allocator);

// reconfiguration.parked_runtimes resolved: `auto` is the thread budget (the machine's CPUs
// where there is none).
size_t ParkLimitFor(const ModelConfig& model, const ResourceAllocator* allocator);

// The CPUs `model` is profiled and planned on: its share, or every CPU of the node.
std::vector<int> PlanningCpus(const ModelConfig& model, const ResourceAllocator* allocator);

// An emulated model's profile is its `emulate.profile`, read as it is (nothing is measured);
// a model that is not emulated on a virtual node fails (CheckEmulated).
// The profile of `model` for plans of up to `threads` threads: stored in `profile_dir` under the
// model's key, or measured with real pinned runtimes on `cores` (LoadOrMeasureModelProfile;
// minutes), `progress` told of every point and finished at the end (may be null). Sets the
// progress metric to 1 once the profile is there.
StatusOr<Profile> LoadModelProfile(const ModelConfig& model, int threads,
                                   const std::vector<int>& cores, const std::string& runtime_path,
                                   const std::string& profile_dir, ProcessLauncher* launcher,
                                   ProfilingProgress* progress);

// The optimizer's plan for T = `threads` to start serving on: B = batching.max_batch, or with
// batching.max_batch_latency_ms, among the plans whose batch latency keeps within it, the
// smallest B (a power of two, or max_batch) whose rows/s are within kBatchForRateNearMost of
// the most (StepUpBatch: a larger B that serves a few percent more makes every row wait for a
// longer batch), B = 1 where none keeps within it; logged with its predicted latency and the
// fat instance's.
StatusOr<Plan> FirstPlan(const ModelConfig& model, const Optimizer& optimizer, int threads);

}  // namespace packrat
