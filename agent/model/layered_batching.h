// LayeredBatching: what a `batching.mode: layered` model (lbci-paper) needs beside its instance
// sets — the top-up policy of each thread count (from its stage profile, measured once and
// stored), the answers to the runtimes' top-up queries, and the queue-depth hint the serving
// runtimes read to know whether asking is worth it.
//
// Thread-safety: all methods may be called from any thread. Prepare blocks (measurements);
// TopUp runs on runtimes' completion threads; the queue observer under the scheduler's lock
// (it takes only hint_mu_, and calls nothing while holding it).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/batching/batch_scheduler.h"
#include "agent/batching/top_up_policy.h"
#include "agent/config/config.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/model/instance_set.h"
#include "agent/planning/stage_profile.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"
#include "common/mutex.h"

namespace packrat {

// Layered batching as derived for one thread count (stage_profile.h).
struct LayeredInfo {
  int threads = 0;
  int stages = 0;
  int64_t profiled_batch = 0;   // N
  double budget_ms = 0;         // t_opt
  double strict_budget_ms = 0;  // t_OPT
  double max_fluctuation = 0;   // r_max
  int64_t optimal_batch = 0;    // N_opt
  StageProfile::Fit fit;        // g(b)
};

struct LayeredBatchingOptions {
  std::string runtime_path;
  std::string profile_dir;
  ResourceAllocator* allocator = nullptr;    // not owned; null: unpinned measurements
  ProcessLauncher* launcher = nullptr;       // not owned
  metrics::ModelMetrics* metrics = nullptr;  // not owned; null: no metrics
};

class LayeredBatching {
 public:
  // `config` outlives this; its batching.mode is layered.
  LayeredBatching(const ModelConfig& config, LayeredBatchingOptions options);

  // Loads or measures the stage profile of every thread count in `groups` that has none large
  // enough yet, and derives its top-up policy. Blocking (measurements).
  Status Prepare(const std::vector<InstanceGroup>& groups);
  // B for a set of `groups`: the smallest N_opt (capped at each group's b), at least 1.
  int64_t BatchTarget(const std::vector<InstanceGroup>& groups) const;
  // The queue top-ups take rows from; set once, before any set serves (queries come only from
  // runtimes with slices). Outlives the runtimes.
  void set_scheduler(BatchScheduler* scheduler) { scheduler_.store(scheduler); }
  // The top-up source of runtimes of `threads` threads; empty where Prepare made no policy for
  // it.
  TopUpSource SourceFor(int threads);
  // The serving set's runtimes are the ones told how many rows are queued.
  void SetHintTargets(const InstanceSet& set);
  // Tells the hint targets `rows` are queued (BatchScheduler's queue observer).
  void QueuedRows(int64_t rows);
  std::vector<LayeredInfo> Info() const;

 private:
  // Answers a runtime's top-up query: whole requests from the queue's front while the policy
  // admits them.
  TopUpGrant TopUp(const TopUpPolicy& policy, const TopUpQuery& query);

  const ModelConfig& config_;
  const LayeredBatchingOptions options_;
  std::atomic<BatchScheduler*> scheduler_{nullptr};
  mutable Mutex mu_;
  // The policy of each thread count; written by Prepare before any runtime that uses it starts.
  std::map<int, std::shared_ptr<const TopUpPolicy>> policies_ GUARDED_BY(mu_);
  Mutex hint_mu_;  // taken under the scheduler's lock: nothing is called while it is held
  std::vector<RuntimeInstance*> hint_targets_ GUARDED_BY(hint_mu_);
};

}  // namespace packrat
