#include "agent/model/layered_batching.h"

#include <algorithm>

#include "agent/profiling/stage_profiler.h"
#include "common/logging.h"

namespace packrat {

LayeredBatching::LayeredBatching(const ModelConfig& config, LayeredBatchingOptions options)
    : config_(config), options_(std::move(options)) {}

int64_t LayeredBatching::BatchTarget(const std::vector<InstanceGroup>& groups) const {
  MutexLock lock(&mu_);
  int64_t target = 0;
  for (const InstanceGroup& g : groups) {
    auto it = policies_.find(g.threads);
    if (it == policies_.end()) continue;
    const int64_t n = std::min<int64_t>(it->second->optimal_batch(), g.batch);
    target = target == 0 ? n : std::min(target, n);
  }
  return std::max<int64_t>(target, 1);
}

Status LayeredBatching::Prepare(const std::vector<InstanceGroup>& groups) {
  std::map<int, int64_t> largest_batch;  // per thread count: the most rows a slice holds
  for (const InstanceGroup& g : groups) {
    largest_batch[g.threads] = std::max<int64_t>(largest_batch[g.threads], g.batch);
  }
  for (const auto& [threads, batch] : largest_batch) {
    {
      MutexLock lock(&mu_);
      auto it = policies_.find(threads);
      if (it != policies_.end() && it->second->profile().max_batch() >= batch) continue;
    }
    StageProfilerOptions o;
    o.model = config_;
    o.runtime_path = options_.runtime_path;
    o.threads = threads;
    o.max_batch = batch;
    o.repeats = config_.batching.profile_repeats;
    if (options_.allocator) {
      for (const CpuInfo& c : options_.allocator->topology().cpus()) o.cores.push_back(c.cpu);
      if (static_cast<int>(o.cores.size()) < threads) o.cores.clear();
    }
    ASSIGN_OR_RETURN(StageProfile profile,
                     LoadOrMeasureStageProfile(options_.profile_dir, o, options_.launcher));
    auto policy = std::make_shared<const TopUpPolicy>(
        std::make_shared<const StageProfile>(std::move(profile)),
        config_.batching.latency_budget_ms);
    const StageProfile& p = policy->profile();
    PACKRAT_LOG(INFO) << "model '" << config_.name << "': layered batching at " << threads
                      << " thread(s): " << p.num_stages()
                      << " stages, N_opt=" << policy->optimal_batch() << " for the "
                      << policy->budget_ms() << " ms budget (strict " << policy->strict_budget_ms()
                      << " ms, fluctuation " << p.MaxFluctuation() * 100
                      << "%), g(b) = " << p.fit().z2 << " + (" << p.fit().z1 << " - " << p.fit().z2
                      << ") / (1 + (b/" << p.fit().z3 << ")^" << p.fit().z4 << ") ms, fit error "
                      << p.fit().rms_rel_error * 100 << "% rms";
    MutexLock lock(&mu_);
    policies_[threads] = std::move(policy);
  }
  if (options_.metrics) {
    options_.metrics->layered_optimal_batch().Set(static_cast<double>(BatchTarget(groups)));
  }
  return Status::Ok();
}

TopUpSource LayeredBatching::SourceFor(int threads) {
  std::shared_ptr<const TopUpPolicy> policy;
  {
    MutexLock lock(&mu_);
    auto it = policies_.find(threads);
    if (it == policies_.end()) return {};
    policy = it->second;
  }
  return [this, policy](const TopUpQuery& q) { return TopUp(*policy, q); };
}

void LayeredBatching::SetHintTargets(const InstanceSet& set) {
  MutexLock lock(&hint_mu_);
  hint_targets_.clear();
  for (const auto& w : set.workers) {
    if (w->instance) hint_targets_.push_back(w->instance.get());
  }
}

void LayeredBatching::QueuedRows(int64_t rows) {
  MutexLock lock(&hint_mu_);
  for (RuntimeInstance* r : hint_targets_) r->SetQueuedRowsHint(rows);
}

std::vector<LayeredInfo> LayeredBatching::Info() const {
  std::vector<LayeredInfo> out;
  MutexLock lock(&mu_);
  for (const auto& [threads, policy] : policies_) {
    LayeredInfo info;
    info.threads = threads;
    info.stages = policy->profile().num_stages();
    info.profiled_batch = policy->profile().max_batch();
    info.budget_ms = policy->budget_ms();
    info.strict_budget_ms = policy->strict_budget_ms();
    info.max_fluctuation = policy->profile().MaxFluctuation();
    info.optimal_batch = policy->optimal_batch();
    info.fit = policy->profile().fit();
    out.push_back(info);
  }
  return out;
}

TopUpGrant LayeredBatching::TopUp(const TopUpPolicy& policy, const TopUpQuery& query) {
  BatchScheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return TopUpGrant{};
  const SteadyTime now = std::chrono::steady_clock::now();
  TopUpAdmission admission(policy, query, now);
  std::vector<std::shared_ptr<InferenceRequest>> taken = scheduler->TakeFront(std::ref(admission));
  const bool refused = admission.refused();
  const TopUpPolicy::Prediction& last = admission.last();
  TopUpGrant grant;
  for (const auto& r : taken) grant.rows += r->rows();
  grant.requests = std::move(taken);
  grant.final = grant.rows > 0 || refused;
  using Outcome = metrics::ModelMetrics::TopUpOutcome;
  metrics::ModelMetrics* m = options_.metrics;
  if (grant.rows > 0) {
    for (const auto& r : grant.requests) r->MarkDispatched(now);
    if (m) {
      m->topup_queries(Outcome::kJoined).Increment();
      m->topup_rows().Increment(static_cast<double>(grant.rows));
      m->topup_predicted_latency().Observe(last.total_ms() / 1e3);
      for (const auto& r : grant.requests) {
        m->queue_duration().Observe(std::chrono::duration<double>(now - r->arrival()).count());
        m->statistics().RecordQueued(now - r->arrival());
      }
    }
    PACKRAT_LOG(DEBUG) << "model '" << config_.name << "': top-up after stage " << query.stages_done
                       << "/" << query.num_stages << ": " << grant.rows << " row(s) join "
                       << query.rows << ", predicted t_all " << last.total_ms() << " ms (wait "
                       << last.wait_ms << " + done " << last.done_ms << " + add " << last.add_ms
                       << " + rest " << last.rest_ms << ") < " << policy.strict_budget_ms()
                       << " ms";
  } else if (refused) {
    if (m) m->topup_queries(Outcome::kRefused).Increment();
    PACKRAT_LOG(DEBUG) << "model '" << config_.name << "': top-up after stage " << query.stages_done
                       << "/" << query.num_stages << " refused: t_all " << last.total_ms()
                       << " ms >= " << policy.strict_budget_ms() << " ms";
  } else if (m) {
    m->topup_queries(Outcome::kQueueEmpty).Increment();
  }
  return grant;
}

}  // namespace packrat
