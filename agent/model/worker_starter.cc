#include "agent/model/worker_starter.h"

#include <algorithm>
#include <atomic>
#include <future>

#include "agent/pool/cpu_list.h"
#include "agent/pool/runtime_options.h"
#include "agent/pool/virtual_node.h"
#include "common/logging.h"

namespace packrat {
namespace {

// Waits for every start (std::async) and puts each started process into its worker; on any
// failure stops the ones that started and returns the first error.
template <typename Instance>
Status AwaitStarts(std::vector<std::future<StatusOr<std::unique_ptr<Instance>>>>& starts,
                   const std::vector<std::shared_ptr<Worker>>& workers,
                   std::unique_ptr<Instance> Worker::*slot) {
  Status status;
  for (size_t i = 0; i < workers.size(); ++i) {
    auto started = starts[i].get();
    if (started.ok()) {
      (*workers[i]).*slot = std::move(started).value();
    } else if (status.ok()) {
      status = started.status();
    }
  }
  if (!status.ok()) {
    for (const auto& w : workers) w->Stop(std::chrono::milliseconds(0));
  }
  return status;
}

// Makes cgroup names unique in the agent: two versions of one model (a reload) both have a
// generation 1, and removing the old one's group must not kill the new one's runtime.
std::atomic<uint64_t> g_group_counter{0};

}  // namespace

WorkerStarter::WorkerStarter(const ModelConfig& config, WorkerStarterOptions options,
                             WorkerHooks hooks)
    : config_(config), options_(std::move(options)), hooks_(std::move(hooks)) {}

StatusOr<std::vector<std::shared_ptr<Worker>>> WorkerStarter::Start(
    const std::vector<std::pair<int, int64_t>>& shapes, const std::vector<int>& exclude,
    uint64_t generation) const {
  RETURN_IF_ERROR(CheckEmulated(config_));
  std::vector<int> threads;
  for (const auto& [t, b] : shapes) threads.push_back(t);
  std::vector<Placement> placements(shapes.size());
  if (options_.allocator) {
    // Within the model's share of the node, where it has one.
    std::vector<int> off_limits = options_.allocator->OutsideShare(config_.name);
    off_limits.insert(off_limits.end(), exclude.begin(), exclude.end());
    ASSIGN_OR_RETURN(placements, options_.allocator->Place(threads, off_limits));
  }
  // Every worker's cgroup first (cheap), then the runtimes in parallel: each start is mostly
  // the runtime loading and warming up its model.
  std::vector<std::shared_ptr<Worker>> workers;
  std::vector<bool> busy(shapes.size());  // some of its CPUs serve a running instance
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto w = std::make_shared<Worker>();
    w->threads = shapes[i].first;
    w->batch = shapes[i].second;
    w->placement = placements[i];
    if (options_.cpusets) {
      ASSIGN_OR_RETURN(w->cgroup,
                       options_.cpusets->Create(config_.name + "." + std::to_string(generation) +
                                                    "." + std::to_string(i) + "." +
                                                    std::to_string(g_group_counter.fetch_add(1)),
                                                w->placement.cpus, w->placement.mems));
    }
    if (options_.allocator) {
      // Before this worker's own lease: CPUs held now belong to running instances.
      for (int cpu : w->placement.cpus) busy[i] = busy[i] || options_.allocator->holders(cpu) > 0;
      w->lease = options_.allocator->Hold(w->placement.cpus);
    }
    workers.push_back(std::move(w));
  }
  if (config_.generation.enabled) {
    RETURN_IF_ERROR(StartDecoders(workers, generation));
  } else {
    RETURN_IF_ERROR(StartBatchRuntimes(workers, busy, generation));
  }
  return workers;
}

RuntimeStart DecideRuntimeStart(const ReconfigurationConfig& rc, bool beside, bool behind) {
  RuntimeStart start;
  if (!beside) return start;
  if (!behind) start.idle_start_s = rc.idle_start_s;
  if (rc.skip_warmup_on_busy_cpus) {
    start.warmup_while_idle = start.idle_start_s > 0;
    start.cold = !start.warmup_while_idle;
  }
  return start;
}

Status WorkerStarter::StartBatchRuntimes(const std::vector<std::shared_ptr<Worker>>& workers,
                                         const std::vector<bool>& busy, uint64_t generation) const {
  std::vector<std::future<StatusOr<std::unique_ptr<RuntimeInstance>>>> starts;
  const ReconfigurationConfig& rc = config_.reconfiguration;
  const bool beside = std::find(busy.begin(), busy.end(), true) != busy.end();
  const bool behind = beside && hooks_.behind && hooks_.behind();
  for (size_t i = 0; i < workers.size(); ++i) {
    RuntimeInstanceOptions o = BatchRuntimeOptions(config_, options_.runtime_path);
    o.index = static_cast<int>(i);
    o.generation = generation;
    o.threads = workers[i]->threads;
    o.batch = workers[i]->batch;
    o.capacity = SliceCapacity(o.batch);
    o.cores = workers[i]->placement.cpus;
    if (workers[i]->cgroup) o.cgroup_procs = workers[i]->cgroup->procs_file();
    // Beside a serving set: at idle priority and cold, each where configured; at idle
    // priority a warm-up costs the serving runtimes nothing, so only a start no longer there
    // (starved) stays cold.
    const RuntimeStart start = DecideRuntimeStart(rc, busy[i], behind);
    o.idle_start_s = start.idle_start_s;
    o.warmup_while_idle = start.warmup_while_idle;
    if (start.cold) {
      o.warmup_iterations = 0;
      workers[i]->started_cold = true;
    }
    if (busy[i] && (start.cold || start.idle_start_s > 0)) {
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': instance " << generation << "." << i
                        << " starts" << (start.cold ? " cold" : "")
                        << (start.idle_start_s > 0 ? " at idle priority" : "")
                        << (start.warmup_while_idle ? ", warm only if still there" : "")
                        << (behind && rc.idle_start_s > 0 ? " (the model is behind)" : "")
                        << ": its CPUs " << FormatCpuList(workers[i]->placement.cpus)
                        << " still serve the current set";
    }
    o.idle_spin_us = options_.runtime_idle_spin_us;
    if (hooks_.computed) {
      o.on_slice_computed = [computed = hooks_.computed, threads = o.threads,
                             seen = std::make_shared<std::map<int64_t, int>>()](
                                const SliceTiming& t) { computed(threads, t, seen.get()); };
    }
    o.on_death = hooks_.runtime_died;
    if (hooks_.top_up) {
      o.top_up = hooks_.top_up(o.threads);
      if (!o.top_up) {
        return Internal("no layered-batching policy for " + std::to_string(o.threads) +
                        " thread(s)");
      }
    }
    starts.push_back(std::async(std::launch::async, [o = std::move(o), this] {
      return RuntimeInstance::Start(o, options_.launcher);
    }));
  }
  return AwaitStarts(starts, workers, &Worker::instance);
}

Status WorkerStarter::StartDecoders(const std::vector<std::shared_ptr<Worker>>& workers,
                                    uint64_t generation) const {
  std::vector<std::future<StatusOr<std::unique_ptr<DecodeInstance>>>> starts;
  for (size_t i = 0; i < workers.size(); ++i) {
    DecodeInstanceOptions o = DecodeRuntimeOptions(config_, options_.runtime_path);
    o.index = static_cast<int>(i);
    o.generation = generation;
    o.threads = workers[i]->threads;
    o.slots = static_cast<int>(SliceCapacity(workers[i]->batch));
    o.cores = workers[i]->placement.cpus;
    if (workers[i]->cgroup) o.cgroup_procs = workers[i]->cgroup->procs_file();
    o.on_death = hooks_.decoder_died;
    o.on_step = [computed = hooks_.computed,
                 name = config_.name + "/g" + std::to_string(generation) + "." + std::to_string(i),
                 threads = o.threads, seen = std::make_shared<std::map<int64_t, int>>()](
                    int64_t sequences, std::chrono::nanoseconds took) {
      PACKRAT_LOG(DEBUG) << name << ": decode step of " << sequences << " sequence(s) in "
                         << took.count() / 1000 << " us";
      if (!computed) return;
      SliceTiming step;
      step.rows = sequences;
      step.requests = sequences;
      step.compute = took;
      computed(threads, step, seen.get());
    };
    starts.push_back(std::async(std::launch::async, [o = std::move(o), this] {
      return DecodeInstance::Start(o, options_.launcher);
    }));
  }
  return AwaitStarts(starts, workers, &Worker::decoder);
}

}  // namespace packrat
