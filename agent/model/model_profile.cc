#include "agent/model/model_profile.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include "agent/planning/batch_for_rate.h"
#include "agent/pool/virtual_node.h"
#include "agent/profiling/profile_store.h"
#include "common/logging.h"

namespace packrat {

StatusOr<Profile> LoadModelProfile(const ModelConfig& model, int threads,
                                   const std::vector<int>& cores, const std::string& runtime_path,
                                   const std::string& profile_dir, ProcessLauncher* launcher,
                                   ProfilingProgress* progress) {
  RETURN_IF_ERROR(CheckEmulated(model));
  const std::string& given = model.emulate.enabled ? model.emulate.profile : model.profile;
  if (!given.empty()) {
    // Emulated runtimes last the profile's latencies; a `profile:` was measured on another node
    // (the operator vouches that it fits this one): either is the model's profile as it is.
    StatusOr<Profile> profile = Profile::LoadCsv(given);
    if (profile.ok()) {
      PACKRAT_LOG(INFO) << "model '" << model.name
                        << "': " << (model.emulate.enabled ? "emulated, profile " : "profile ")
                        << given << " (" << profile->size() << " points, up to "
                        << profile->MaxThreads() << " threads); nothing measured";
    }
    if (progress) progress->Finish(profile.ok());
    return profile;
  }
  StatusOr<Profile> profile =
      LoadOrMeasureModelProfile(model, threads, cores, runtime_path, profile_dir, launcher,
                                [progress](const ProfileProgress& p) {
                                  if (progress) progress->Update(p);
                                });
  if (progress) progress->Finish(profile.ok());
  return profile;
}

StatusOr<Plan> FirstPlan(const ModelConfig& model, const Optimizer& optimizer, int threads) {
  const int max_batch = static_cast<int>(model.batching.max_batch);
  const double limit = model.batching.max_batch_latency_ms;
  Plan plan;
  if (limit > 0) {
    // The load is unknown: the smallest B near the most capacity whose batches keep within the
    // limit (StepUpBatch from no batch at all, as the autoscaler's MostCapacity), else the
    // fastest plan. (B = max_batch here would run batches far beyond it until the estimator's
    // first decision.)
    ASSIGN_OR_RETURN(std::vector<Plan> plans, optimizer.SolveAll(threads, max_batch));
    plan = plans.front();
    std::map<int64_t, const Plan*> within;
    for (const Plan& p : plans) {
      if (p.latency_ms <= limit) within[p.batch] = &p;
    }
    const std::optional<int64_t> b = StepUpBatch(0, max_batch, [&within](int64_t b) {
      const auto it = within.find(b);
      return it == within.end()
                 ? std::nullopt
                 : std::optional<double>(1e3 * it->second->batch / it->second->latency_ms);
    });
    if (b) plan = *within.at(*b);
  } else {
    ASSIGN_OR_RETURN(plan, optimizer.Solve(threads, max_batch));
  }
  const int batch = plan.batch;
  PACKRAT_LOG(INFO) << "model '" << model.name << "': plan for T=" << threads << ", B=" << batch
                    << ": " << plan.ConfigString() << ", predicted " << plan.latency_ms
                    << " ms per batch"
                    << (plan.fat_latency_ms
                            ? " (fat instance: " + std::to_string(*plan.fat_latency_ms) + " ms)"
                            : std::string());
  return plan;
}

int ThreadBudgetFor(const ModelConfig& model, const ResourceAllocator* allocator) {
  int cores = allocator ? allocator->thread_budget() : 0;
  if (allocator) {
    if (auto share = allocator->Share(model.name)) {
      cores = std::min(cores, static_cast<int>(share->size()));
    }
  }
  if (model.auto_threads > 0) return cores > 0 ? std::min(cores, model.auto_threads) : 0;
  return cores;
}

size_t ParkLimitFor(const ModelConfig& model, const ResourceAllocator* allocator) {
  const int64_t configured = model.reconfiguration.parked_runtimes;
  if (configured != ReconfigurationConfig::kParkAuto) return static_cast<size_t>(configured);
  const int budget = ThreadBudgetFor(model, allocator);
  return static_cast<size_t>(budget > 0 ? budget
                                        : std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<int> PlanningCpus(const ModelConfig& model, const ResourceAllocator* allocator) {
  std::vector<int> cpus;
  if (allocator == nullptr) return cpus;
  if (auto share = allocator->Share(model.name)) return *share;
  for (const CpuInfo& c : allocator->topology().cpus()) cpus.push_back(c.cpu);
  return cpus;
}

}  // namespace packrat
