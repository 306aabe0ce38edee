// WorkerStarter: starts the runtimes of a model's instance sets — places them (allocator),
// gives each its cpuset cgroup, and launches them in parallel, batch runtimes or decoders as
// the model is, with the options every runtime of the model shares (runtime_options.h).
//
// Thread-safety: Start may be called from any thread (the model's control thread, and Load).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/model/instance_set.h"
#include "agent/pool/cpuset_controller.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"
#include "agent/pool/runtime_instance.h"

namespace packrat {

// What the served model hears from its runtimes. Called on the runtimes' completion threads;
// must not block.
struct WorkerHooks {
  // A runtime of `threads` threads computed a slice (or a decode step of `timing.rows`
  // sequences: its compute only), as `timing` says. `seen` counts that runtime's batches per
  // size (one map per runtime, only its completion thread touches it).
  std::function<void(int threads, const SliceTiming& timing, std::map<int64_t, int>* seen)>
      computed;
  // A batch runtime died with `orphans` queued or running (RuntimeInstanceOptions::on_death).
  std::function<void(std::vector<WorkSlice> orphans, const std::string& why)> runtime_died;
  // A decoder died; its sequences have failed.
  std::function<void(const std::string& why)> decoder_died;
  // Layered batching: the top-up source of runtimes of `threads` threads; empty where the model
  // is not layered. A layered model without a policy for `threads` fails the start.
  std::function<TopUpSource(int threads)> top_up;
  // Whether the model is behind (rows queued beyond what its serving set runs): a set started
  // then is urgent, so runtimes beside the serving ones start at normal priority, not idle
  // (reconfiguration.idle_start_s). Empty: never behind.
  std::function<bool()> behind;
};

struct WorkerStarterOptions {
  std::string runtime_path;
  ResourceAllocator* allocator = nullptr;  // not owned; null: no placement
  CpusetController* cpusets = nullptr;     // not owned; null: no cgroups
  ProcessLauncher* launcher = nullptr;     // not owned
  int runtime_idle_spin_us = 100;
  // The most rows a runtime started for b may take in one slice (a decoder: its slots):
  // max(b, slice_capacity). batching.max_batch where runtimes are resizable, else 0.
  int64_t slice_capacity = 0;
};

// How a batch runtime starts: at idle priority for how long, and whether it warms up.
struct RuntimeStart {
  double idle_start_s = 0;         // 0: normal priority (RuntimeInstanceOptions::idle_start_s)
  bool warmup_while_idle = false;  // warm up only while still at idle priority
  bool cold = false;               // no warm-up at all
};

// The start of a runtime whose CPUs still serve the current set (`beside`), or not, for a
// model that is `behind` (rows queued beyond two batches of its set: a start is urgent) or
// not. Beside a serving set: at idle priority unless behind or idle_start_s is 0; cold where
// skip_warmup_on_busy_cpus says so, which at idle priority means warm only while still there.
// Elsewhere: as configured (normal priority, warm). Pure.
RuntimeStart DecideRuntimeStart(const ReconfigurationConfig& rc, bool beside, bool behind);

class WorkerStarter {
 public:
  // `config` outlives the starter.
  WorkerStarter(const ModelConfig& config, WorkerStarterOptions options, WorkerHooks hooks);

  // Starts one runtime per ⟨threads, b⟩ of `shapes` for set `generation`, placed on CPUs
  // outside `exclude` (those the kept runtimes run on). All or nothing: on any failure the ones
  // that started are stopped and the first error is returned. A runtime placed on CPUs that a
  // live one still holds starts cold where reconfiguration.skip_warmup_on_busy_cpus says so.
  // Blocks for the starts (seconds to minutes).
  StatusOr<std::vector<std::shared_ptr<Worker>>> Start(
      const std::vector<std::pair<int, int64_t>>& shapes, const std::vector<int>& exclude,
      uint64_t generation) const;

  int64_t SliceCapacity(int64_t batch) const { return std::max(batch, options_.slice_capacity); }
  const WorkerStarterOptions& options() const { return options_; }

 private:
  Status StartBatchRuntimes(const std::vector<std::shared_ptr<Worker>>& workers,
                            const std::vector<bool>& busy, uint64_t generation) const;
  Status StartDecoders(const std::vector<std::shared_ptr<Worker>>& workers,
                       uint64_t generation) const;

  const ModelConfig& config_;
  const WorkerStarterOptions options_;
  const WorkerHooks hooks_;
};

}  // namespace packrat
