#include "agent/model/served_model.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "agent/batching/slice_io.h"
#include "agent/planning/batch_for_rate.h"
#include "agent/planning/loaded_latency.h"
#include "agent/pool/cpu_list.h"
#include "agent/profiling/profile_store.h"
#include "agent/profiling/stage_profiler.h"
#include "common/logging.h"

namespace packrat {
namespace {

// A restart of dead runtimes is tried again this long after a failed attempt.
constexpr auto kRestartBackoff = std::chrono::seconds(5);
// The most instances a plan may have, and of one group (ValidatePlan).
constexpr int64_t kMaxPlanInstances = 1024;

int64_t FloorPowerOfTwo(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// For the log: how large a batch cut from a backlog of `set` may be, where more than B.
std::string BacklogNote(const InstanceSet& set) {
  if (set.backlog_rows <= set.target_rows) return "";
  return " (a backlog runs in batches of up to " + std::to_string(set.backlog_rows) + ")";
}

// The instances' thread counts, one entry per instance, ascending.
std::vector<int> ThreadCounts(const std::vector<InstanceGroup>& groups) {
  std::vector<int> threads;
  for (const InstanceGroup& g : groups) {
    threads.insert(threads.end(), static_cast<size_t>(g.count), g.threads);
  }
  std::sort(threads.begin(), threads.end());
  return threads;
}

BatchSizeEstimator::Options EstimatorOptions(const ModelConfig& config) {
  BatchSizeEstimator::Options o;
  const ReconfigurationConfig& rc = config.reconfiguration;
  o.alpha = rc.alpha;
  o.window = rc.window;
  o.sample_period = std::chrono::milliseconds(rc.sample_period_ms);
  o.reconfiguration_timeout = std::chrono::milliseconds(rc.timeout_ms);
  o.min_batch = 1;
  o.max_batch = FloorPowerOfTwo(config.batching.max_batch > 0 ? config.batching.max_batch : 1024);
  return o;
}

// Why a plan on the serving runtimes was taken instead of the optimizer's; "" if it was not.
std::string PassedOverNote(const Plan& taken, const std::optional<Plan>& passed_over, double margin,
                           bool generative) {
  if (!passed_over) return "";
  std::ostringstream note;
  note.precision(3);
  note << "; " << taken.ConfigString() << " on the serving runtimes (" << taken.latency_ms
       << " ms profiled): " << passed_over->ConfigString() << " (" << passed_over->latency_ms
       << " ms) would "
       << (generative ? "change decoders (their sequences finish beside the new ones) for steps"
                      : "start runtimes for batches")
       << " at most " << margin * 100 << "% faster";
  return note.str();
}

std::string GroupsString(const std::vector<InstanceGroup>& groups) {
  std::string out;
  for (const InstanceGroup& g : groups) {
    if (!out.empty()) out += " + ";
    out += std::to_string(g.count) + "×⟨t=" + std::to_string(g.threads) +
           ",b=" + std::to_string(g.batch) + "⟩";
  }
  return out;
}

int64_t TargetRows(const std::vector<InstanceGroup>& groups) {
  int64_t rows = 0;
  for (const InstanceGroup& g : groups) rows += int64_t{g.count} * g.batch;
  return rows;
}

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

// For the log: a plan's rows per second at full batches, or why B has no plan (see
// PlanWithCapacity: the batches it would run are too slow for max_batch_latency_ms).
std::string CapacityText(const std::optional<double>& rows_per_s) {
  if (!rows_per_s) return "no plan within the batch-latency limit";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << *rows_per_s << " rows/s";
  return out.str();
}

}  // namespace

ServedModel::ServedModel(ModelConfig config, ServedModelOptions options, ProcessLauncher* launcher)
    : config_(std::move(config)),
      signature_(config_.Signature()),
      options_(std::move(options)),
      launcher_(launcher),
      slowdowns_(/*alpha=*/0.1, /*min_slices=*/8, config_.reconfiguration.slowdown_floor),
      estimator_(EstimatorOptions(config_)),
      // Long enough for the estimator's window, the overload windows and the scale-down span.
      arrival_rate_(std::chrono::milliseconds(
          std::max({config_.reconfiguration.window * config_.reconfiguration.sample_period_ms,
                    4 * config_.reconfiguration.overload_window_ms,
                    config_.reconfiguration.scale_down_delay_ms}) +
          config_.reconfiguration.sample_period_ms)) {
  adaptive_ = config_.auto_instances && config_.reconfiguration.adaptive;
  // Where an input's row size varies, the smallest input slab a runtime of this model has: one
  // row of each fixed-size input, and the room of each varying one. Fixed rows always fit.
  if (std::any_of(config_.inputs.begin(), config_.inputs.end(),
                  [](const TensorSpec& t) { return t.RowBytes() < 0; })) {
    smallest_input_slab_ =
        SlabBytes(config_.inputs, 1, static_cast<uint64_t>(config_.batching.variable_tensor_bytes));
  }
}

ServedModel::~ServedModel() { Stop(std::chrono::seconds(5)); }

std::string ServedModel::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::vector<pid_t> ServedModel::instance_pids() const {
  std::vector<pid_t> pids;
  const ServingSnapshot s = Snapshot();
  for (const WorkerInfo& w : s.workers) pids.push_back(w.pid);
  for (const WorkerInfo& w : s.parked) pids.push_back(w.pid);
  return pids;
}

std::vector<InstanceGroup> ServedModel::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ ? active_->groups : std::vector<InstanceGroup>();
}

std::optional<Plan> ServedModel::optimizer_plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ ? active_->plan : std::nullopt;
}

std::string ServedModel::load_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_ || active_->workers.empty()) return "";
  return active_->workers.front()->load_report();
}

std::vector<LayeredInfo> ServedModel::layered_info() const {
  std::vector<LayeredInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [threads, policy] : top_up_policies_) {
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

int64_t ServedModel::BatchTarget(const std::vector<InstanceGroup>& groups) const {
  if (config_.batching.mode != BatchingMode::kLayered) return TargetRows(groups);
  std::lock_guard<std::mutex> lock(mu_);
  int64_t target = 0;
  for (const InstanceGroup& g : groups) {
    auto it = top_up_policies_.find(g.threads);
    if (it == top_up_policies_.end()) continue;
    const int64_t n = std::min<int64_t>(it->second->optimal_batch(), g.batch);
    target = target == 0 ? n : std::min(target, n);
  }
  return std::max<int64_t>(target, 1);
}

void ServedModel::SetHintTargets(const InstanceSet& set) {
  std::lock_guard<std::mutex> lock(hint_mu_);
  hint_targets_.clear();
  for (const auto& w : set.workers) {
    if (w->instance) hint_targets_.push_back(w->instance.get());
  }
}

Status ServedModel::PrepareLayered(const std::vector<InstanceGroup>& groups) {
  if (config_.batching.mode != BatchingMode::kLayered) return Status::Ok();
  std::map<int, int64_t> largest_batch;  // per thread count: the most rows a slice holds
  for (const InstanceGroup& g : groups) {
    largest_batch[g.threads] = std::max<int64_t>(largest_batch[g.threads], g.batch);
  }
  for (const auto& [threads, batch] : largest_batch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = top_up_policies_.find(threads);
      if (it != top_up_policies_.end() && it->second->profile().max_batch() >= batch) continue;
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
                     LoadOrMeasureStageProfile(options_.profile_dir, o, launcher_));
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
    std::lock_guard<std::mutex> lock(mu_);
    top_up_policies_[threads] = std::move(policy);
  }
  if (options_.metrics) {
    options_.metrics->layered_optimal_batch().Set(static_cast<double>(BatchTarget(groups)));
  }
  return Status::Ok();
}

TopUpGrant ServedModel::TopUp(const TopUpPolicy& policy, const TopUpQuery& query) {
  const SteadyTime now = std::chrono::steady_clock::now();
  TopUpAdmission admission(policy, query, now);
  std::vector<std::shared_ptr<InferenceRequest>> taken = scheduler_->TakeFront(std::ref(admission));
  const bool refused = admission.refused();
  const TopUpPolicy::Prediction& last = admission.last();
  TopUpGrant grant;
  for (const auto& r : taken) grant.rows += r->rows();
  grant.requests = std::move(taken);
  grant.final = grant.rows > 0 || refused;
  using Outcome = metrics::ModelMetrics::TopUpOutcome;
  metrics::ModelMetrics* m = options_.metrics;
  if (grant.rows > 0) {
    if (m) {
      m->topup_queries(Outcome::kJoined).Increment();
      m->topup_rows().Increment(static_cast<double>(grant.rows));
      m->topup_predicted_latency().Observe(last.total_ms() / 1e3);
      for (const auto& r : grant.requests) {
        m->queue_duration().Observe(std::chrono::duration<double>(now - r->arrival()).count());
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

ServingSnapshot ServedModel::Snapshot() const {
  ServingSnapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  s.ewma = estimator_ewma_;
  s.estimate = estimator_estimate_;
  s.adaptive = adaptive_;
  s.thread_budget = ThreadBudget();
  std::vector<const Worker*> seen;
  auto add = [&](const InstanceSet& set, bool draining) {
    for (size_t i = 0; i < set.workers.size(); ++i) {
      const auto& w = set.workers[i];
      if (std::find(seen.begin(), seen.end(), w.get()) != seen.end()) continue;
      seen.push_back(w.get());
      WorkerInfo info;
      info.pid = w->pid();
      info.cpus = w->placement.cpus;
      info.threads = w->threads;
      info.batch = i < set.batches.size() ? set.batches[i] : w->batch;
      info.generation = set.generation;
      info.draining = draining;
      info.alive = w->alive();
      s.workers.push_back(std::move(info));
    }
  };
  if (active_) {
    s.generation = active_->generation;
    s.batch = active_->target_rows;
    s.backlog_batch = std::max(active_->target_rows, active_->backlog_rows);
    s.groups = active_->groups;
    s.plan = active_->plan;
    add(*active_, false);
  }
  for (const auto& set : draining_) add(*set, true);
  for (const auto& w : parked_) {
    WorkerInfo info;
    info.pid = w->pid();
    info.cpus = w->placement.cpus;
    info.threads = w->threads;
    info.batch = w->batch;
    info.alive = w->alive();
    s.parked.push_back(std::move(info));
  }
  return s;
}

bool ServedModel::ResizableRuntimes() const {
  return config_.auto_instances && config_.batching.max_batch > 0 &&
         (generative() || config_.batching.mode == BatchingMode::kBatched);
}

bool ServedModel::FlexibleSlices() const { return ResizableRuntimes() && !generative(); }

std::optional<double> ServedModel::CapacityOn(const std::vector<int>& threads, int64_t b) const {
  auto plan = optimizer_->SolveOnInstances(threads, static_cast<int>(b));
  if (!plan.ok()) return std::nullopt;
  const double latency = PredictedLatencyMs(*plan);
  if (latency <= 0 || TooSlow(latency)) return std::nullopt;
  return static_cast<double>(b) * 1e3 / latency;
}

int64_t ServedModel::BacklogRows(const std::vector<InstanceGroup>& groups, int64_t target) const {
  if (!FlexibleSlices() || !optimizer_) return 0;
  const std::vector<int> threads = ThreadCounts(groups);
  return BacklogBatch(target, config_.batching.max_batch,
                      [&](int64_t b) { return CapacityOn(threads, b); });
}

int64_t ServedModel::SliceCapacity(int64_t batch) const {
  return ResizableRuntimes() ? std::max(batch, config_.batching.max_batch) : batch;
}

int ServedModel::ThreadBudget() const {
  const int cores = options_.allocator ? options_.allocator->thread_budget() : 0;
  if (config_.auto_threads > 0) return cores > 0 ? std::min(cores, config_.auto_threads) : 0;
  return cores;
}

StatusOr<std::vector<InstanceGroup>> ServedModel::ResolvePlan(std::optional<Plan>* plan_out) {
  if (!config_.auto_instances) return config_.instances;
  const int threads = config_.auto_threads > 0 ? config_.auto_threads : ThreadBudget();
  const int batch = static_cast<int>(config_.batching.max_batch);
  if (threads < 1) return FailedPrecondition("no usable cores to plan for");
  ProfilerOptions profiling;
  profiling.model = config_;
  profiling.runtime_path = options_.runtime_path;
  if (options_.allocator) {
    for (const CpuInfo& c : options_.allocator->topology().cpus()) profiling.cores.push_back(c.cpu);
  }
  const int profiled = std::min<int>(
      threads, profiling.cores.empty() ? threads : static_cast<int>(profiling.cores.size()));
  for (int t = 1; t <= profiled; ++t) profiling.threads.push_back(t);
  // Neighbours fill the plan's cores, not cores it leaves to others.
  if (static_cast<int>(profiling.cores.size()) > profiled) profiling.cores.resize(profiled);
  profiling.batches = PowersOfTwoUpTo(batch);
  ASSIGN_OR_RETURN(Profile profile,
                   LoadOrMeasureProfile(options_.profile_dir, profiling, launcher_, nullptr));
  optimizer_ = std::make_unique<Optimizer>(std::move(profile));
  ASSIGN_OR_RETURN(Plan plan, optimizer_->Solve(threads, batch));
  PACKRAT_LOG(INFO) << "model '" << config_.name << "': plan for T=" << threads << ", B=" << batch
                    << ": " << plan.ConfigString() << ", predicted " << plan.latency_ms
                    << " ms per batch"
                    << (plan.fat_latency_ms
                            ? " (fat instance: " + std::to_string(*plan.fat_latency_ms) + " ms)"
                            : std::string());
  std::vector<InstanceGroup> groups = plan.groups;
  *plan_out = std::move(plan);
  return groups;
}

StatusOr<std::vector<std::shared_ptr<Worker>>> ServedModel::StartWorkers(
    const std::vector<std::pair<int, int64_t>>& shapes, const std::vector<int>& exclude,
    uint64_t generation) {
  std::vector<int> threads;
  for (const auto& [t, b] : shapes) threads.push_back(t);
  std::vector<Placement> placements(shapes.size());
  if (options_.allocator) {
    ASSIGN_OR_RETURN(placements, options_.allocator->Place(threads, exclude));
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
      ASSIGN_OR_RETURN(
          w->cgroup, options_.cpusets->Create(
                         config_.name + "." + std::to_string(generation) + "." + std::to_string(i),
                         w->placement.cpus, w->placement.mems));
    }
    if (options_.allocator) {
      // Before this worker's own lease: CPUs held now belong to running instances.
      for (int cpu : w->placement.cpus) busy[i] = busy[i] || options_.allocator->holders(cpu) > 0;
      w->lease = options_.allocator->Hold(w->placement.cpus);
    }
    workers.push_back(std::move(w));
  }
  if (generative()) return StartDecoders(std::move(workers), generation);
  std::vector<std::future<StatusOr<std::unique_ptr<RuntimeInstance>>>> starts;
  for (size_t i = 0; i < workers.size(); ++i) {
    RuntimeInstanceOptions o;
    o.model_name = config_.name;
    o.index = static_cast<int>(i);
    o.generation = generation;
    o.runtime_path = options_.runtime_path;
    o.model_path = config_.path;
    o.threads = workers[i]->threads;
    o.batch = workers[i]->batch;
    o.capacity = SliceCapacity(o.batch);
    o.cores = workers[i]->placement.cpus;
    if (workers[i]->cgroup) o.cgroup_procs = workers[i]->cgroup->procs_file();
    o.inputs = config_.inputs;
    o.outputs = config_.outputs;
    o.variable_slab_bytes = static_cast<uint64_t>(config_.batching.variable_tensor_bytes);
    o.warmup_iterations = config_.warmup_iterations;
    if (busy[i] && config_.reconfiguration.skip_warmup_on_busy_cpus) {
      o.warmup_iterations = 0;
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': instance " << generation << "." << i
                        << " starts cold: its CPUs " << FormatCpuList(workers[i]->placement.cpus)
                        << " still serve the current set";
    }
    o.idle_spin_us = options_.runtime_idle_spin_us;
    o.kernel = config_.kernel;
    o.accuracy = config_.accuracy;
    o.startup_timeout = std::chrono::seconds(config_.startup_timeout_s);
    o.slice_timeout = std::chrono::seconds(config_.slice_timeout_s);
    const Profile* profile = optimizer_ ? &optimizer_->profile() : nullptr;
    o.on_slice_computed = [this, profile, threads = o.threads,
                           seen =
                               std::make_shared<std::map<int64_t, int>>()](const SliceTiming& t) {
      ObserveComputed(profile, threads, t.rows, t.compute, seen.get());
    };
    o.on_death = [this](std::vector<WorkSlice> orphans, const std::string& why) {
      OnWorkerDeath(std::move(orphans), why);
    };
    if (config_.batching.mode == BatchingMode::kLayered) {
      std::shared_ptr<const TopUpPolicy> policy;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = top_up_policies_.find(o.threads);
        if (it != top_up_policies_.end()) policy = it->second;
      }
      if (!policy)
        return Internal("no layered-batching policy for " + std::to_string(o.threads) +
                        " thread(s)");
      o.top_up = [this, policy](const TopUpQuery& q) { return TopUp(*policy, q); };
    }
    starts.push_back(std::async(std::launch::async, [o = std::move(o), this] {
      return RuntimeInstance::Start(o, launcher_);
    }));
  }
  RETURN_IF_ERROR(AwaitStarts(starts, workers, &Worker::instance));
  return workers;
}

StatusOr<std::vector<std::shared_ptr<Worker>>> ServedModel::StartDecoders(
    std::vector<std::shared_ptr<Worker>> workers, uint64_t generation) {
  std::vector<std::future<StatusOr<std::unique_ptr<DecodeInstance>>>> starts;
  for (size_t i = 0; i < workers.size(); ++i) {
    DecodeInstanceOptions o;
    o.model_name = config_.name;
    o.index = static_cast<int>(i);
    o.generation = generation;
    o.runtime_path = options_.runtime_path;
    o.model_path = config_.path;
    o.threads = workers[i]->threads;
    o.slots = static_cast<int>(SliceCapacity(workers[i]->batch));
    o.refill = config_.generation.refill;
    o.max_prompt_tokens = config_.generation.max_prompt_tokens;
    o.cores = workers[i]->placement.cpus;
    if (workers[i]->cgroup) o.cgroup_procs = workers[i]->cgroup->procs_file();
    o.startup_timeout = std::chrono::seconds(config_.startup_timeout_s);
    o.slice_timeout = std::chrono::seconds(config_.slice_timeout_s);
    o.on_death = [this](const std::string&) { RestartSoon(); };  // its sequences failed
    const Profile* profile = optimizer_ ? &optimizer_->profile() : nullptr;
    o.on_step = [this, profile,
                 name = config_.name + "/g" + std::to_string(generation) + "." + std::to_string(i),
                 threads = o.threads, seen = std::make_shared<std::map<int64_t, int>>()](
                    int64_t sequences, std::chrono::nanoseconds took) {
      PACKRAT_LOG(DEBUG) << name << ": decode step of " << sequences << " sequence(s) in "
                         << took.count() / 1000 << " us";
      ObserveComputed(profile, threads, sequences, took, seen.get());
    };
    starts.push_back(std::async(std::launch::async, [o = std::move(o), this] {
      return DecodeInstance::Start(o, launcher_);
    }));
  }
  RETURN_IF_ERROR(AwaitStarts(starts, workers, &Worker::decoder));
  return workers;
}

GenerateLimits ServedModel::generate_limits() const {
  GenerateLimits limits;
  limits.max_tokens = config_.generation.max_tokens;
  limits.default_max_tokens = config_.generation.default_max_tokens;
  limits.max_prompt_tokens = config_.generation.max_prompt_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  if (active_) {
    for (const auto& w : active_->workers) {
      if (!w->decoder) continue;
      limits.vocab = w->decoder->vocab();
      if (w->decoder->max_len() > 1) {
        limits.max_prompt_tokens = std::min(limits.max_prompt_tokens, w->decoder->max_len() - 1);
      }
      break;
    }
  }
  return limits;
}

Status ServedModel::Generate(std::shared_ptr<GenerateRequest> request,
                             std::function<void()>* cancel) {
  if (!generative()) {
    return FailedPrecondition("model '" + config_.name + "' is not generative; use /infer");
  }
  if (state() != ModelState::kReady) {
    return FailedPrecondition("model '" + config_.name + "' is not ready");
  }
  // A decoder picked from the active set may be stopping when the sequence reaches it (a
  // switch of sets in between): it refuses the sequence, and the next pick, from the set
  // active then, takes it.
  std::vector<std::shared_ptr<Worker>> refused;
  for (;;) {
    std::shared_ptr<Worker> target;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (active_) {
        // The least loaded decoder for its share b of the plan (MakeSet sets how many it
        // decodes at once; the rest wait in it).
        size_t best = 0;
        for (size_t i = 0; i < active_->workers.size(); ++i) {
          const std::shared_ptr<Worker>& w = active_->workers[i];
          if (!w->decoder || !w->decoder->alive()) continue;
          if (std::find(refused.begin(), refused.end(), w) != refused.end()) continue;
          const int64_t share = i < active_->batches.size() ? active_->batches[i] : w->batch;
          const size_t load =
              w->decoder->load() * 1000 / static_cast<size_t>(std::max<int64_t>(1, share));
          if (!target || load < best) target = w, best = load;
        }
      }
    }
    if (!target) return Unavailable("model '" + config_.name + "' has no live instance");
    const std::optional<uint64_t> id = target->decoder->TrySubmit(request);
    if (!id) {
      refused.push_back(std::move(target));
      continue;
    }
    // A generative model's arrivals are decode steps asked for (max_tokens, an upper bound),
    // the unit of its plans' capacity: b sequences a step.
    rows_arrived_.fetch_add(std::max<int64_t>(1, request->params.max_tokens),
                            std::memory_order_relaxed);
    // The worker (and its decoder) stays alive as long as a canceller can reach it.
    *cancel = [target, id = *id] { target->decoder->Cancel(id); };
    return Status::Ok();
  }
}

std::shared_ptr<InstanceSet> ServedModel::MakeSet(uint64_t generation,
                                                  std::vector<InstanceGroup> groups,
                                                  std::optional<Plan> plan,
                                                  std::vector<std::shared_ptr<Worker>> workers,
                                                  std::vector<int64_t> batches) {
  auto set = std::make_shared<InstanceSet>();
  set->generation = generation;
  set->target_rows = BatchTarget(groups);
  set->backlog_rows = BacklogRows(groups, set->target_rows);
  set->groups = std::move(groups);
  set->plan = std::move(plan);
  set->workers = std::move(workers);
  set->batches = std::move(batches);
  if (set->batches.size() != set->workers.size()) {
    set->batches.clear();
    for (const auto& w : set->workers) set->batches.push_back(w->batch);
  }
  if (generative()) {
    // Sequences go to decoders directly (Generate). Decoders with max_batch slots decode the
    // plan's B = Σb and, while more sequences wait, up to max_batch in all, each its share in
    // proportion to its b (as a batch model's backlog cut): the plan's thread split, and never
    // more sequences at once than a static plan with max_batch slots would take.
    for (size_t i = 0; i < set->workers.size(); ++i) {
      const std::shared_ptr<Worker>& w = set->workers[i];
      if (!w->decoder) continue;
      const int64_t b = set->batches[i];
      w->decoder->set_slots_limit(
          ResizableRuntimes()
              ? static_cast<int>(std::max(
                    b, b * config_.batching.max_batch / std::max<int64_t>(1, set->target_rows)))
              : 0);
    }
    return set;
  }
  std::vector<InstanceExecutor*> executors;
  for (const auto& w : set->workers) executors.push_back(w->instance.get());
  // Layered batching runs one batch per instance at a time, each started as soon as an
  // instance is free; rows that arrive meanwhile stay queued and may join at a stage boundary.
  const bool layered = config_.batching.mode == BatchingMode::kLayered;
  const int inflight =
      layered ? static_cast<int>(executors.size()) : config_.batching.max_inflight_batches;
  set->dispatcher = std::make_shared<Dispatcher>(
      executors, inflight,
      [this] {
        if (scheduler_) scheduler_->Notify();
      },
      set->batches);
  set->dispatcher->set_whole_batches(layered);
  set->dispatcher->set_observer(MakeDispatchObserver());
  return set;
}

Status ServedModel::Load() {
  std::optional<Plan> plan;
  Status status;
  std::vector<InstanceGroup> groups;
  std::vector<std::shared_ptr<Worker>> workers;
  if (auto resolved = ResolvePlan(&plan); resolved.ok()) {
    groups = std::move(resolved).value();
    status = ValidatePlan(groups);
    if (status.ok()) status = PrepareLayered(groups);
  } else {
    status = resolved.status();
  }
  const uint64_t generation = next_generation_++;
  if (status.ok()) {
    std::vector<std::pair<int, int64_t>> shapes;
    for (const InstanceGroup& g : groups) {
      for (int k = 0; k < g.count; ++k) shapes.emplace_back(g.threads, g.batch);
    }
    if (auto started = StartWorkers(shapes, {}, generation); started.ok()) {
      workers = std::move(started).value();
    } else {
      status = started.status();
    }
  }
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = status.message();
    if (state_.load() != ModelState::kStopped) state_.store(ModelState::kFailed);
    if (options_.metrics) {
      std::vector<metrics::InstanceCount> counts;
      for (const InstanceGroup& g : groups)
        counts.push_back({g.threads, g.batch, "failed", g.count});
      options_.metrics->SetInstances(counts);
    }
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "' failed to load: " << status.message();
    return status;
  }

  std::shared_ptr<InstanceSet> set = MakeSet(generation, groups, plan, std::move(workers), {});
  BatchAggregator::Options batching;
  batching.target_rows = set->target_rows;
  batching.max_delay = std::chrono::microseconds(
      config_.batching.mode == BatchingMode::kLayered ? 0 : config_.batching.max_delay_us);
  batching.max_queue_rows = config_.batching.max_queue_rows;
  // Rows queued beyond B run in larger slices (the runtimes' slabs hold max_batch rows), as
  // large as still serves more rows per second, while the estimator or the overload path
  // finds the plan for the load.
  batching.max_rows = set->backlog_rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load() == ModelState::kStopped) {  // Stop() raced with loading
      return Unavailable("model stopped while loading");
    }
    active_ = set;
    if (!generative()) scheduler_ = std::make_unique<BatchScheduler>(batching, set->dispatcher);
    if (config_.batching.mode == BatchingMode::kLayered) {
      SetHintTargets(*set);
      scheduler_->set_queue_observer([this](int64_t rows) {
        std::lock_guard<std::mutex> lock(hint_mu_);
        for (RuntimeInstance* r : hint_targets_) r->SetQueuedRowsHint(rows);
      });
    }
    if (metrics::ModelMetrics* m = options_.metrics) {
      m->target_batch().Set(static_cast<double>(set->target_rows));
      m->generation().Set(static_cast<double>(set->generation));
      if (set->plan) m->predicted_batch_latency().Set(set->plan->latency_ms / 1e3);
      if (BatchScheduler* scheduler = scheduler_.get()) {
        queue_rows_metric_ =
            m->BindQueueRows([scheduler] { return static_cast<double>(scheduler->queued_rows()); });
      }
      m->SetKernel(set->workers.front()->load_report(), config_.kernel.Key());
    }
    PublishInstancesLocked();
    state_.store(ModelState::kReady, std::memory_order_release);
    control_thread_ = std::thread([this] { ControlLoop(); });
  }
  PACKRAT_LOG(INFO) << "model '" << config_.name << "' ready: " << set->workers.size()
                    << " instance(s) " << GroupsString(groups) << ", B=" << set->target_rows
                    << BacklogNote(*set);
  return Status::Ok();
}

Status ServedModel::CheckRowFits(const InferenceRequest& request) const {
  if (smallest_input_slab_ == 0 || RowsThatFit(request, smallest_input_slab_) >= 1) {
    return Status::Ok();
  }
  uint64_t total = 0;
  std::string each;
  for (const TensorView& t : request.decoded().inputs) {
    const uint64_t row = RowBytesOf(t);
    total += row;
    if (!each.empty()) each += ", ";
    each += "'";
    each += t.name;
    each += "' ";
    each += std::to_string(row);
  }
  std::string why = "one row of the inputs takes ";
  why += std::to_string(total);
  why += " bytes (";
  why += each;
  why += "); a slice of model '";
  why += config_.name;
  why += "' carries at most ";
  why += std::to_string(config_.batching.variable_tensor_bytes);
  why += " bytes of each input whose row size varies (batching.variable_tensor_bytes)";
  return OutOfRange(std::move(why));
}

Status ServedModel::Submit(std::shared_ptr<InferenceRequest> request) {
  if (generative()) {
    return FailedPrecondition("model '" + config_.name + "' is generative: use POST /v2/models/" +
                              config_.name + "/generate");
  }
  if (state() != ModelState::kReady) {
    return FailedPrecondition("model '" + config_.name + "' is not ready");
  }
  RETURN_IF_ERROR(CheckRowFits(*request));
  const int64_t rows = request->rows();
  request->set_rows_finished_observer([in_system = rows_in_system_](int64_t n) {
    in_system->fetch_sub(n, std::memory_order_relaxed);
  });
  // Counted in before the scheduler can finish any of its rows.
  rows_in_system_->fetch_add(rows, std::memory_order_relaxed);
  if (Status s = scheduler_->Submit(std::move(request)); !s.ok()) {
    rows_in_system_->fetch_sub(rows, std::memory_order_relaxed);  // refused: never finished
    return s;
  }
  rows_arrived_.fetch_add(rows, std::memory_order_relaxed);
  return Status::Ok();
}

void ServedModel::Stop(std::chrono::milliseconds drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load() == ModelState::kStopped) return;
    state_.store(ModelState::kStopped, std::memory_order_release);
  }
  const auto deadline = std::chrono::steady_clock::now() + drain;
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    control_stop_ = true;
  }
  control_cv_.notify_all();
  if (control_thread_.joinable()) control_thread_.join();
  // Jobs that never ran (plan changes queued behind the one that ran) get their answer.
  for (auto& job : jobs_) job();
  jobs_.clear();

  queue_rows_metric_ = metrics::CallbackHandle();  // before the scheduler it reads goes away
  if (scheduler_) {
    scheduler_->Drain(deadline);
    scheduler_->Stop();
  }
  std::shared_ptr<InstanceSet> active;
  std::vector<std::shared_ptr<InstanceSet>> draining;
  std::vector<std::shared_ptr<Worker>> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active = std::move(active_);
    draining = std::move(draining_);
    workers = std::move(parked_);  // idle: they stop at once
    parked_.clear();
  }
  if (active) workers.insert(workers.end(), active->workers.begin(), active->workers.end());
  for (const auto& set : draining)
    workers.insert(workers.end(), set->workers.begin(), set->workers.end());
  for (auto& w : workers) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    w->Stop(std::max(left, std::chrono::milliseconds(0)));
  }
}

Status ServedModel::ValidatePlan(const std::vector<InstanceGroup>& groups) const {
  if (groups.empty()) return InvalidArgument("the plan has no instances");
  int64_t threads = 0;
  int64_t instances = 0;
  for (const InstanceGroup& g : groups) {
    if (g.count < 1 || g.threads < 1 || g.batch < 1) {
      return InvalidArgument("every instance group needs count, threads and batch >= 1");
    }
    if (g.count > kMaxPlanInstances || g.threads > 4096 || g.batch > (1 << 16)) {
      return InvalidArgument(
          "instance group out of range (count <= 1024, threads <= 4096, "
          "batch <= 65536)");
    }
    threads += int64_t{g.count} * g.threads;
    instances += g.count;
  }
  if (instances > kMaxPlanInstances) {
    return InvalidArgument("the plan has " + std::to_string(instances) + " instances; at most " +
                           std::to_string(kMaxPlanInstances));
  }
  const int budget = options_.allocator ? options_.allocator->thread_budget() : 0;
  if (budget > 0 && threads > budget) {
    return InvalidArgument("the plan needs " + std::to_string(threads) + " threads; only " +
                           std::to_string(budget) + " core(s) are usable (" +
                           options_.allocator->topology().Describe() + ")");
  }
  return Status::Ok();
}

void ServedModel::ChangePlan(PlanChange change, std::function<void(Status)> done) {
  if (state() != ModelState::kReady) {
    return done(FailedPrecondition("model '" + config_.name + "' is not ready"));
  }
  if (change.instances && change.batch) {
    return done(InvalidArgument("give either 'instances' or 'batch', not both"));
  }
  if (change.instances) {
    if (Status s = ValidatePlan(*change.instances); !s.ok()) return done(s);
  }
  if (change.batch) {
    if (!config_.auto_instances) {
      return done(InvalidArgument("model '" + config_.name +
                                  "' has a static plan and no profile to plan B from; give an "
                                  "explicit 'instances' plan"));
    }
    const int64_t max = config_.batching.max_batch;
    if (*change.batch < 1 || *change.batch > max) {
      return done(InvalidArgument("batch must be between 1 and batching.max_batch (" +
                                  std::to_string(max) + ")"));
    }
  }
  if (change.adaptive.value_or(false) && !config_.auto_instances) {
    return done(InvalidArgument("adaptive reconfiguration needs `instances: auto`"));
  }
  Post([this, change = std::move(change), done = std::move(done)]() mutable {
    if (state() != ModelState::kReady) {
      return done(Unavailable("model '" + config_.name + "' is stopping"));
    }
    done(ApplyChange(change));
  });
}

Status ServedModel::ApplyChange(const PlanChange& change) {
  const bool adaptive =
      change.adaptive.value_or(!change.instances && !change.batch && config_.auto_instances);
  Status status;
  if (change.instances) {
    status = Reconfigure(*change.instances, std::nullopt, "management API", false);
  } else if (change.batch) {
    const int threads = config_.auto_threads > 0 ? config_.auto_threads : ThreadBudget();
    auto plan = optimizer_->Solve(threads, static_cast<int>(*change.batch));
    if (!plan.ok()) return plan.status();
    status = Reconfigure(plan->groups, *plan, "management API: B=" + std::to_string(*change.batch),
                         false);
  }
  if (status.ok()) {
    estimator_.Restart();  // what it saw under the old plan (one request of 64 rows, say) is stale
    arrival_rate_.Restart();
    last_overload_move_.reset();
    backlog_ = false;
    std::lock_guard<std::mutex> lock(mu_);
    adaptive_ = adaptive;
  }
  return status;
}

Status ServedModel::Reconfigure(std::vector<InstanceGroup> groups, std::optional<Plan> plan,
                                const std::string& reason, bool restart) {
  const auto started = std::chrono::steady_clock::now();
  // Slices computed until this returns are left out of the slowdowns.
  slowdowns_.BeginSwitch();
  struct SwitchEnd {
    SlowdownTracker* slowdowns;
    ~SwitchEnd() { slowdowns->EndSwitch(std::chrono::steady_clock::now()); }
  } switch_end{&slowdowns_};
  std::shared_ptr<InstanceSet> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = active_;
  }
  if (!old) return FailedPrecondition("model '" + config_.name + "' is not serving");
  RETURN_IF_ERROR(PrepareLayered(groups));

  // Keep live instances whose shape the new plan also has; then, where slices may outgrow the
  // b an instance started with (SliceCapacity), live ones of the same thread count at the new
  // b (only the dispatcher's cut changes: no runtime starts, the switch is immediate); start
  // the rest.
  std::map<std::pair<int, int64_t>, int> wanted;
  for (const InstanceGroup& g : groups) wanted[{g.threads, g.batch}] += g.count;
  std::vector<std::shared_ptr<Worker>> kept;
  std::vector<int64_t> kept_batches;
  std::vector<int> kept_cpus;
  std::vector<bool> taken(old->workers.size(), false);
  auto add_kept = [&](const std::shared_ptr<Worker>& w, int64_t b) {
    kept.push_back(w);
    kept_batches.push_back(b);
    kept_cpus.insert(kept_cpus.end(), w->placement.cpus.begin(), w->placement.cpus.end());
  };
  auto keep = [&](size_t i, int64_t b) {
    taken[i] = true;
    add_kept(old->workers[i], b);
  };
  for (size_t i = 0; i < old->workers.size(); ++i) {
    int& n = wanted[{old->workers[i]->threads, old->batches[i]}];
    if (n > 0 && old->workers[i]->alive()) {
      --n;
      keep(i, old->batches[i]);
    }
  }
  size_t resized = 0;
  for (const InstanceGroup& g : groups) {
    if (!ResizableRuntimes()) break;
    int& n = wanted[{g.threads, g.batch}];
    for (size_t i = 0; i < old->workers.size() && n > 0; ++i) {
      const Worker& w = *old->workers[i];
      if (taken[i] || !w.alive() || w.threads != g.threads || w.capacity() < g.batch) continue;
      --n;
      ++resized;
      keep(i, g.batch);
    }
  }
  // A dead runtime's process has exited: its CPUs are free for its replacement, which then
  // warms up there instead of starting cold beside a lease nobody uses.
  for (size_t i = 0; i < old->workers.size(); ++i) {
    if (!taken[i] && !old->workers[i]->alive()) old->workers[i]->lease = CpuLease();
  }
  // Then parked runtimes, the most recently parked first, each on CPUs that no instance the
  // new set already has runs on (they were placed for another set).
  std::vector<std::shared_ptr<Worker>> unparked;
  std::vector<std::shared_ptr<Worker>> parked_order;  // parked_ before, oldest first
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_order = parked_;
    for (const InstanceGroup& g : groups) {
      int& n = wanted[{g.threads, g.batch}];
      for (size_t i = parked_.size(); i-- > 0 && n > 0;) {
        const std::shared_ptr<Worker> w = parked_[i];
        const bool overlaps =
            std::any_of(w->placement.cpus.begin(), w->placement.cpus.end(), [&](int cpu) {
              return std::find(kept_cpus.begin(), kept_cpus.end(), cpu) != kept_cpus.end();
            });
        if (overlaps || !CanServe(*w, g.threads, g.batch)) continue;
        --n;
        parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
        unparked.push_back(w);
        add_kept(w, g.batch);
      }
    }
  }
  // Unparked runtimes hold their CPUs again (the allocator's rule 4); a failed start parks
  // them again.
  for (const auto& w : unparked) {
    if (options_.allocator) w->lease = options_.allocator->Hold(w->placement.cpus);
  }
  auto repark = [&] {
    for (const auto& w : unparked) w->lease = CpuLease();
    // Back in their places: oldest first, as the limit evicts from the front.
    std::lock_guard<std::mutex> lock(mu_);
    auto in = [](const std::vector<std::shared_ptr<Worker>>& v, const std::shared_ptr<Worker>& w) {
      return std::find(v.begin(), v.end(), w) != v.end();
    };
    std::vector<std::shared_ptr<Worker>> order;
    for (const auto& w : parked_order) {
      if (in(parked_, w) || in(unparked, w)) order.push_back(w);
    }
    for (const auto& w : parked_) {
      if (!in(parked_order, w)) order.push_back(w);
    }
    parked_ = std::move(order);
  };
  std::vector<std::pair<int, int64_t>> shapes;
  for (const InstanceGroup& g : groups) {
    int& n = wanted[{g.threads, g.batch}];
    for (; n > 0; --n) shapes.emplace_back(g.threads, g.batch);
  }
  if (shapes.empty() && resized == 0 && unparked.empty() && kept.size() == old->workers.size()) {
    if (!plan || (old->plan && old->plan->latency_ms == plan->latency_ms)) {
      return Status::Ok();  // already serving exactly this plan
    }
  }
  const uint64_t generation = next_generation_++;
  PACKRAT_LOG(INFO) << "model '" << config_.name << "': reconfiguring (" << reason << ") from "
                    << GroupsString(old->groups) << " to " << GroupsString(groups) << ": keeping "
                    << kept.size() - unparked.size() << " (" << resized
                    << " at a new batch size), starting " << shapes.size() << ", unparking "
                    << unparked.size() << ", dropping "
                    << old->workers.size() - (kept.size() - unparked.size()) << " instance(s)";
  StatusOr<std::vector<std::shared_ptr<Worker>>> started_workers =
      StartWorkers(shapes, kept_cpus, generation);
  if (!started_workers.ok()) {
    repark();
    return started_workers.status();
  }
  std::vector<std::shared_ptr<Worker>> fresh = std::move(started_workers).value();
  std::vector<std::shared_ptr<Worker>> workers = kept;
  std::vector<int64_t> batches = kept_batches;
  for (const auto& w : fresh) {
    workers.push_back(w);
    batches.push_back(w->batch);
  }
  std::shared_ptr<InstanceSet> next =
      MakeSet(generation, groups, plan, std::move(workers), std::move(batches));

  // Switch: batches cut from now on go to the new set.
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_.push_back(old);
    active_ = next;
    PublishInstancesLocked();
  }
  if (scheduler_) {
    scheduler_->SwapDispatcher(next->dispatcher, next->target_rows, next->backlog_rows);
  }
  if (config_.batching.mode == BatchingMode::kLayered) SetHintTargets(*next);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  if (metrics::ModelMetrics* m = options_.metrics) {
    m->target_batch().Set(static_cast<double>(next->target_rows));
    m->generation().Set(static_cast<double>(generation));
    if (next->plan) m->predicted_batch_latency().Set(next->plan->latency_ms / 1e3);
    if (restart) {
      m->runtime_restarts().Increment(static_cast<double>(fresh.size() + unparked.size()));
    } else {
      m->reconfigurations().Increment();
      m->reconfiguration_duration().Observe(took.count());
    }
  }
  PACKRAT_LOG(INFO) << "model '" << config_.name << "': generation " << generation << " serving "
                    << GroupsString(groups) << ", B=" << next->target_rows << BacklogNote(*next)
                    << " after " << static_cast<int64_t>(took.count() * 1000) << " ms";

  // Drain: the old set's running batches finish; then its instances that were not kept are
  // parked (live ones, once the set is idle) or stop.
  const auto drain_deadline = std::chrono::steady_clock::now() +
                              std::chrono::seconds(config_.reconfiguration.drain_timeout_s);
  bool idle = true;
  if (old->dispatcher && !old->dispatcher->WaitIdle(drain_deadline)) {
    idle = false;
    PACKRAT_LOG(WARNING) << "model '" << config_.name << "': generation " << old->generation
                         << " did not finish its batches within "
                         << config_.reconfiguration.drain_timeout_s << " s; stopping it anyway";
  }
  const size_t limit = ParkLimit();
  std::vector<std::shared_ptr<Worker>> parking, stopping;
  for (const auto& w : old->workers) {
    if (std::find(kept.begin(), kept.end(), w) != kept.end()) continue;
    // A parked decoder finishes the sequences it has (new ones go to the new set) and then
    // idles.
    if (idle && limit > 0 && w->alive()) {
      w->lease = CpuLease();  // idle: new placements may prefer its CPUs
      parking.push_back(w);
    } else {
      stopping.push_back(w);
    }
  }
  for (const auto& w : stopping) {
    // Decoders finish their sequences here (new ones already go to the new set).
    w->Stop(std::chrono::seconds(config_.reconfiguration.drain_timeout_s));
  }
  std::vector<std::shared_ptr<Worker>> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_.insert(parked_.end(), parking.begin(), parking.end());
    // Dead parked runtimes go first, then the oldest beyond the limit.
    for (auto& w : parked_) {
      if (!w->alive()) evicted.push_back(std::exchange(w, nullptr));
    }
    parked_.erase(std::remove(parked_.begin(), parked_.end(), nullptr), parked_.end());
    const size_t excess = parked_.size() > limit ? parked_.size() - limit : 0;
    evicted.insert(evicted.end(), parked_.begin(),
                   parked_.begin() + static_cast<std::ptrdiff_t>(excess));
    parked_.erase(parked_.begin(), parked_.begin() + static_cast<std::ptrdiff_t>(excess));
    draining_.erase(std::remove(draining_.begin(), draining_.end(), old), draining_.end());
    PublishInstancesLocked();
  }
  // An idle runtime stops at once; an evicted decoder still finishes its sequences.
  for (const auto& w : evicted)
    w->Stop(std::chrono::seconds(config_.reconfiguration.drain_timeout_s));
  PACKRAT_LOG(INFO) << "model '" << config_.name << "': generation " << old->generation
                    << " drained" << (parking.empty() ? "" : ", parking ")
                    << (parking.empty() ? "" : std::to_string(parking.size()) + " runtime(s)");
  return Status::Ok();  // `old` goes: stopped workers leave their cgroups and CPUs
}

size_t ServedModel::ParkLimit() const {
  const int64_t configured = config_.reconfiguration.parked_runtimes;
  if (configured != ReconfigurationConfig::kParkAuto) return static_cast<size_t>(configured);
  const int budget = ThreadBudget();
  return static_cast<size_t>(budget > 0 ? budget
                                        : std::max(1u, std::thread::hardware_concurrency()));
}

bool ServedModel::CanServe(const Worker& w, int threads, int64_t batch) const {
  if (!w.alive() || w.threads != threads) return false;
  return w.batch == batch || (ResizableRuntimes() && w.capacity() >= batch);
}

void ServedModel::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (!control_stop_) {
      jobs_.push_back(std::move(job));
      control_cv_.notify_all();
      return;
    }
  }
  job();  // stopping: the job sees the state and answers at once
}

void ServedModel::ControlLoop() {
  std::unique_lock<std::mutex> lock(control_mu_);
  while (!control_stop_) {
    if (!jobs_.empty()) {
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
      continue;
    }
    const auto next = estimator_.next_sample_time();
    const SteadyTime now = std::chrono::steady_clock::now();
    if (!next || *next <= now) {
      lock.unlock();
      Tick(now);
      lock.lock();
      continue;
    }
    control_cv_.wait_until(lock, *next);
  }
}

void ServedModel::Tick(SteadyTime now) {
  if (state() != ModelState::kReady) return;
  std::shared_ptr<InstanceSet> active;
  bool adaptive;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active = active_;
    adaptive = adaptive_;
  }
  // Dead runtimes are replaced (again, after a failed attempt, once the backoff has passed).
  const bool dead = std::any_of(active->workers.begin(), active->workers.end(),
                                [](const auto& w) { return !w->alive(); });
  if (dead && now - last_restart_ >= kRestartBackoff) {
    last_restart_ = now;
    if (Status s = Reconfigure(active->groups, active->plan, "restarting dead runtimes", true);
        !s.ok()) {
      PACKRAT_LOG(ERROR) << "model '" << config_.name << "': restart failed: " << s.message();
    }
    return;
  }
  // The load: rows queued or running and not answered yet; for a generative model, sequences
  // queued or decoding.
  int64_t load = 0;
  if (scheduler_) {
    load = rows_in_system_->load(std::memory_order_relaxed);
  } else {
    for (const auto& w : active->workers) {
      if (w->decoder) load += static_cast<int64_t>(w->decoder->load());
    }
  }
  if (!estimator_.Sample(now, load)) return;
  arrival_rate_.Sample(now, rows_arrived_.load(std::memory_order_relaxed));
  {
    std::lock_guard<std::mutex> lock(mu_);
    estimator_ewma_ = estimator_.ewma();
    estimator_estimate_ = estimator_.Estimate();
  }
  if (options_.metrics) {
    options_.metrics->estimated_batch().Set(static_cast<double>(estimator_.Estimate()));
  }
  if (adaptive && optimizer_ && !generative() && RelieveOverload(*active, load)) return;
  if (backlog_) {
    // The rows queued while the old plan fell behind are still draining: the queue depth
    // measures them, not the load, and its mode would move B up for nothing (a B whose batches
    // take seconds). The estimator starts afresh once the queue has drained.
    if (load > active->target_rows) return;
    backlog_ = false;
    estimator_.Restart();
    PACKRAT_LOG(INFO) << "model '" << config_.name << "': the backlog has drained (" << load
                      << " row(s) in the system at B=" << active->target_rows
                      << "); the estimator starts afresh";
    return;
  }
  const std::optional<SteadyTime> due = estimator_.next_decision_time();
  const bool at_grid = due && now >= *due && estimator_.Smoothed(active->target_rows).has_value();
  std::optional<int64_t> decision = estimator_.Decide(now, active->target_rows);
  if (!at_grid || !adaptive || !optimizer_) return;
  const int64_t period = config_.reconfiguration.sample_period_ms;
  const auto window =
      std::chrono::milliseconds(std::max<int64_t>(1, config_.reconfiguration.window - 1) * period);
  // Plans are judged against the latency limit at the rate arriving now.
  const std::optional<double> arriving = arrival_rate_.Over(window);
  // Where a plan serves the rate, the rate decides B and the plan; elsewhere the estimator B,
  // and where it keeps B, the plan for B may still change with the rate.
  if (PlanAtRate(*active, arriving, now)) return;
  if (!decision || !FollowEstimate(*active, *decision, arriving, window, now)) {
    ReplanAtRate(*active, arriving, now);
  }
}

bool ServedModel::FollowEstimate(const InstanceSet& active, int64_t decision,
                                 std::optional<double> arriving, std::chrono::milliseconds window,
                                 SteadyTime now) {
  std::string capped;  // a note for the log where the step up stops short of the estimate
  if (decision > active.target_rows && !generative()) {
    // A generative model's idle decode slots cost nothing; a batch model's larger batch costs
    // every row a longer wait, worth it only while it serves more rows per second.
    std::map<int64_t, std::optional<double>> capacities;
    const std::optional<int64_t> step =
        StepUpBatch(active.target_rows, decision, [&](int64_t b) -> std::optional<double> {
          auto planned = PlanWithCapacity(b, active, arriving);
          return capacities[b] = planned ? std::optional<double>(planned->capacity) : std::nullopt;
        });
    auto rows_per_s = [&](int64_t b) { return CapacityText(capacities[b]); };
    if (!step) {
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': keeping B=" << active.target_rows
                        << " (" << rows_per_s(active.target_rows)
                        << "): up to the estimate B=" << decision << " no plan serves "
                        << std::lround((kBatchForRateMinGain - 1) * 100) << "% more (B=" << decision
                        << ": " << rows_per_s(decision) << ")";
      return false;
    }
    if (*step != decision) {
      capped = "; the estimate " + std::to_string(decision) + " would serve " +
               rows_per_s(decision) + ", " + std::to_string(*step) + " serves " + rows_per_s(*step);
      decision = *step;
    }
  }
  if (decision < active.target_rows) {
    if (last_overload_move_ &&
        now - *last_overload_move_ <
            std::chrono::milliseconds(config_.reconfiguration.scale_down_delay_ms)) {
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': keeping B=" << active.target_rows
                        << ": the overload move to it was less than "
                        << config_.reconfiguration.scale_down_delay_ms << " ms ago";
      return false;
    }
    // Fewer rows in the system may only mean that the serving plan keeps up: the step down goes
    // only as far as a plan that the arrivals within the last scale_down_delay_ms (or the
    // estimator's window, if longer) would not have overloaded (StepDownBatch), else the
    // overload path would soon move B back up; and among those, at a known rate, to the
    // smallest whose requests' simulated p99 is near the lowest.
    const int64_t peak_window_ms = config_.reconfiguration.overload_window_ms > 0
                                       ? config_.reconfiguration.overload_window_ms
                                       : static_cast<int64_t>(window.count());
    const auto span = std::max<std::chrono::milliseconds>(
        window, std::chrono::milliseconds(config_.reconfiguration.scale_down_delay_ms));
    std::map<int64_t, std::optional<double>> capacities;
    std::map<int64_t, double> p99s;  // ms, at `arriving`: a batch model's candidates
    const std::optional<int64_t> step = StepDownBatch(
        active.target_rows, decision, peak_window_ms, config_.reconfiguration.max_utilization,
        [&](int64_t ms) { return arrival_rate_.PeakOver(std::chrono::milliseconds(ms), span); },
        [&](int64_t b) -> std::optional<double> {
          auto planned = PlanWithCapacity(b, active, arriving);
          if (planned && planned->simulated) p99s[b] = planned->simulated->p99_ms;
          return capacities[b] = planned ? std::optional<double>(planned->capacity) : std::nullopt;
        },
        [&](int64_t b) -> std::optional<double> {
          if (b == active.target_rows && arriving && *arriving > 0 && !generative()) {
            p99s[b] = SimulatedP99Ms(ServingPlan(active), *arriving);  // the serving plan's
          }
          auto it = p99s.find(b);
          return it == p99s.end() ? std::nullopt : std::optional<double>(it->second);
        });
    const std::string peak = std::to_string(
        arrival_rate_.PeakOver(std::chrono::milliseconds(peak_window_ms), span).value_or(0));
    auto rows_per_s = [&](int64_t b) { return CapacityText(capacities[b]); };
    if (!step && p99s.count(active.target_rows)) {  // ranked: the serving plan fares better
      std::ostringstream ranked;
      for (const auto& [b, ms] : p99s) {
        if (b != active.target_rows) ranked << ", B=" << b << " " << std::lround(ms) << " ms";
      }
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': keeping B=" << active.target_rows
                        << ": at " << arriving.value_or(0) << " rows/s its requests see a "
                        << "simulated p99 of " << std::lround(p99s[active.target_rows])
                        << " ms, more than 5% below every smaller plan the recent arrivals allow"
                        << ranked.str();
      return false;
    }
    if (!step) {
      PACKRAT_LOG(INFO) << "model '" << config_.name << "': keeping B=" << active.target_rows
                        << ": from the estimate B=" << decision << " (" << rows_per_s(decision)
                        << ") up, every smaller plan would have been overloaded by the "
                        << "recent arrivals (a peak of " << peak << " rows/s over "
                        << peak_window_ms << " ms)";
      return false;
    }
    if (*step != decision) {
      auto p99 = [&](int64_t b) {
        auto it = p99s.find(b);
        return it == p99s.end()
                   ? std::string("")
                   : ", a simulated p99 of " + std::to_string(std::lround(it->second)) + " ms";
      };
      capped = "; recent peak " + peak + " rows/s: the estimate " + std::to_string(decision) +
               " serves " + rows_per_s(decision) + p99(decision) + ", " + std::to_string(*step) +
               " serves " + rows_per_s(*step) + p99(*step);
      decision = *step;
    }
  }
  auto planned = PlanWithCapacity(decision, active, arriving);
  if (!planned) {
    PACKRAT_LOG(WARNING) << "model '" << config_.name << "': no plan for B=" << decision;
    return false;
  }
  const Plan& plan = planned->plan;
  if (generative() && decision < active.target_rows &&
      ThreadCounts(plan.groups) == ThreadCounts(active.groups)) {
    // A decode step runs the active sequences only (the runtime compacts them into the first
    // slots), so the serving instances run a smaller B as fast as the plan for it would; the
    // switch would only change how sequences are shared between them.
    PACKRAT_LOG(INFO) << "model '" << config_.name << "': keeping B=" << active.target_rows
                      << ": the plan for B=" << decision
                      << " has the same thread counts, and idle decode slots cost nothing";
    return false;
  }
  const std::string reason = "estimator: B " + std::to_string(active.target_rows) + " -> " +
                             std::to_string(decision) + " (load EWMA " +
                             std::to_string(estimator_.ewma()) + capped + ")" +
                             PassedOverNote(planned->plan, planned->passed_over,
                                            config_.reconfiguration.restart_margin, generative());
  if (Status s = Reconfigure(plan.groups, plan, reason, false); !s.ok()) {
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "': reconfiguration failed, the current "
                       << "set keeps serving: " << s.message();
  }
  return true;
}

double ServedModel::Slowdown(int threads) const { return slowdowns_.Get(threads); }

bool ServedModel::TooSlow(double latency_ms) const {
  const double limit = config_.batching.max_batch_latency_ms;
  return limit > 0 && latency_ms > limit;
}

double ServedModel::PredictedLatencyMs(const Plan& plan) const {
  // Full batches: each group's profiled latency for its b at its thread count's slowdown.
  return LoadedLatencyMs(plan, optimizer_->profile(), std::numeric_limits<double>::infinity(),
                         [this](int threads) { return Slowdown(threads); });
}

BatchingSimulator::Result ServedModel::Simulate(const Plan& plan, double rate) const {
  std::vector<BatchingSimulator::Instance> instances;
  for (const InstanceGroup& g : plan.groups) {
    for (int i = 0; i < g.count; ++i) instances.push_back({g.threads, g.batch});
  }
  BatchingSimulator::Options options;
  options.target_rows = std::max(1, plan.batch);
  options.max_delay = std::chrono::microseconds(config_.batching.max_delay_us);
  options.max_inflight_batches = config_.batching.max_inflight_batches;
  const Profile& profile = optimizer_->profile();
  return simulator_.Run(instances, options, rate, [&](int threads, int64_t rows) {
    return profile.InterpolatedLatency(threads, rows).value_or(plan.latency_ms) * Slowdown(threads);
  });
}

std::optional<ServedModel::PlanChoice> ServedModel::PlanWithCapacity(
    int64_t b, const InstanceSet& serving, std::optional<double> rate) const {
  const int threads = config_.auto_threads > 0 ? config_.auto_threads : ThreadBudget();
  auto best = optimizer_->Solve(threads, static_cast<int>(b));
  if (!best.ok()) return std::nullopt;
  PlanChoice choice{std::move(best).value(), 0, std::nullopt, std::nullopt};
  // A batch model's plans are compared at the batches the rate cuts, where it is known.
  const bool at_rate = rate.has_value() && !generative();
  if (at_rate) {
    if (auto faster = FasterAtRate(
            *optimizer_, threads, static_cast<int>(b), choice.plan, *rate,
            config_.reconfiguration.max_utilization, [this](int t) { return Slowdown(t); },
            [&](const Plan& plan) { return SimulatedP99Ms(plan, *rate); })) {
      choice.plan = *std::move(faster);
    }
  }
  if (at_rate) choice.simulated = Simulate(choice.plan, *rate);
  const double latency = at_rate ? choice.simulated->p99_ms : PredictedLatencyMs(choice.plan);
  const std::vector<int> running = ThreadCounts(serving.groups);
  // A plan that starts runtimes costs their start beside the serving set; for a decoder any
  // other thread counts cost as much, parked decoders included: the sequences decoding stay
  // on the old decoders to their end, beside the new ones on the same CPUs.
  const bool costly = generative() ? ThreadCounts(choice.plan.groups) != running
                                   : StartsRuntimes(choice.plan, serving);
  if (ResizableRuntimes() && !running.empty() && costly) {
    // The serving runtimes can run any b up to max_batch.
    auto kept = optimizer_->SolveOnInstances(running, static_cast<int>(b));
    if (kept.ok()) {
      std::optional<BatchingSimulator::Result> kept_simulated;
      if (at_rate) kept_simulated = Simulate(*kept, *rate);
      const double kept_latency = at_rate ? kept_simulated->p99_ms : PredictedLatencyMs(*kept);
      if (kept_latency <= (1 + config_.reconfiguration.restart_margin) * latency) {
        choice.passed_over = std::move(choice.plan);
        choice.plan = std::move(kept).value();
        choice.simulated = kept_simulated;
      }
    }
  }
  // At a rate, the batches it cuts: simulated for a batch model; for a decoder the slots
  // the rate fills (LoadedLatencyMs).
  const double batch_ms = at_rate ? choice.simulated->mean_batch_ms
                          : rate  ? LoadedLatencyMs(choice.plan, optimizer_->profile(), *rate,
                                                    [this](int t) { return Slowdown(t); })
                                  : PredictedLatencyMs(choice.plan);
  if (TooSlow(batch_ms)) {
    return std::nullopt;
  }
  const double full = PredictedLatencyMs(choice.plan);
  choice.capacity =
      full > 0 ? static_cast<double>(b) * 1e3 / full : std::numeric_limits<double>::infinity();
  return choice;
}

Plan ServedModel::ServingPlan(const InstanceSet& active) {
  Plan serving;
  serving.batch = static_cast<int>(active.target_rows);
  serving.groups = active.groups;
  if (active.plan) serving.latency_ms = active.plan->latency_ms;  // for unprofiled groups
  return serving;
}

bool ServedModel::PlanAtRate(const InstanceSet& active, std::optional<double> arriving,
                             SteadyTime now) {
  if (!config_.reconfiguration.plan_at_rate || generative() || !arriving || *arriving <= 0) {
    return false;
  }
  const auto hold = std::chrono::milliseconds(config_.reconfiguration.scale_down_delay_ms);
  if (last_overload_move_ && now - *last_overload_move_ < hold) return false;
  struct Candidate {
    int64_t b;
    PlanChoice choice;
    double p99_ms;
  };
  std::optional<Candidate> best;
  for (int64_t b = 1; b <= estimator_.options().max_batch; b *= 2) {
    auto planned = PlanWithCapacity(b, active, arriving);
    if (!planned || *arriving > config_.reconfiguration.max_utilization * planned->capacity) {
      continue;
    }
    const double p99 = planned->simulated->p99_ms;
    if (!best || p99 < best->p99_ms) best = Candidate{b, *std::move(planned), p99};
  }
  if (!best) return false;
  if (best->b == active.target_rows && best->choice.plan.groups == active.groups) return true;
  if (RateMoveHeld(now)) return true;
  const double serving_ms = SimulatedP99Ms(ServingPlan(active), *arriving);
  if ((1 + config_.reconfiguration.restart_margin) * best->p99_ms >= serving_ms) return true;
  std::ostringstream reason;
  reason.precision(3);
  reason << "at " << *arriving << " rows/s: a simulated p99 of " << std::lround(best->p99_ms)
         << " ms at B=" << best->b << ", " << std::lround(serving_ms)
         << " ms on the serving B=" << active.target_rows
         << PassedOverNote(best->choice.plan, best->choice.passed_over,
                           config_.reconfiguration.restart_margin, false);
  MoveAtRate(best->choice.plan, reason.str(), now);
  return true;
}

bool ServedModel::RateMoveHeld(SteadyTime now) const {
  return last_rate_move_ &&
         now - *last_rate_move_ <
             std::chrono::milliseconds(config_.reconfiguration.scale_down_delay_ms);
}

void ServedModel::MoveAtRate(const Plan& plan, const std::string& reason, SteadyTime now) {
  last_rate_move_ = now;
  if (Status s = Reconfigure(plan.groups, plan, reason, false); !s.ok()) {
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "': reconfiguration failed, the current "
                       << "set keeps serving: " << s.message();
  }
}

void ServedModel::ReplanAtRate(const InstanceSet& active, std::optional<double> arriving,
                               SteadyTime now) {
  if (!arriving || *arriving <= 0 || generative() || RateMoveHeld(now)) return;
  const auto planned = PlanWithCapacity(active.target_rows, active, arriving);
  if (!planned || planned->plan.groups == active.groups) return;
  const double serving_ms = SimulatedP99Ms(ServingPlan(active), *arriving);
  const double next_ms = planned->simulated->p99_ms;
  if ((1 + config_.reconfiguration.restart_margin) * next_ms >= serving_ms) return;
  std::ostringstream reason;
  reason.precision(3);
  reason << "at " << *arriving << " rows/s, B=" << active.target_rows << ": a simulated p99 of "
         << std::lround(next_ms) << " ms on this plan, " << std::lround(serving_ms)
         << " ms on the serving one";
  MoveAtRate(planned->plan, reason.str(), now);
}

bool ServedModel::StartsRuntimes(const Plan& plan, const InstanceSet& serving) const {
  if (!ResizableRuntimes()) return true;
  const std::vector<int> needed = ThreadCounts(plan.groups);
  std::vector<int> available = ThreadCounts(serving.groups);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& w : parked_) {
      if (w->alive()) available.push_back(w->threads);
    }
  }
  std::sort(available.begin(), available.end());
  return !std::includes(available.begin(), available.end(), needed.begin(), needed.end());
}

bool ServedModel::RelieveOverload(const InstanceSet& active, int64_t load) {
  const int64_t window_ms = config_.reconfiguration.overload_window_ms;
  if (window_ms <= 0) return false;
  const int64_t current = active.target_rows;
  // Rows must be piling up beyond one batch: a rate that only looks high over a short window
  // (arrivals are random) while the plan keeps up changes nothing.
  if (estimator_.ewma() <= static_cast<double>(current) || load <= current) return false;
  std::optional<double> arriving;  // once known, plans are judged at it (PlanWithCapacity)
  std::map<int64_t, std::optional<PlanChoice>> plans;
  auto capacity = [&](int64_t b) -> std::optional<double> {
    auto it = plans.find(b);
    if (it == plans.end()) it = plans.emplace(b, PlanWithCapacity(b, active, arriving)).first;
    if (!it->second) return std::nullopt;
    return it->second->capacity;
  };
  const std::optional<double> at_b = capacity(current);
  if (!at_b) return false;
  // While rows queue, the serving set cuts batches of up to backlog_rows (BacklogBatch): that
  // is what it serves under load, and what a move must beat.
  const int64_t backlog_b = std::max(current, active.backlog_rows);
  double serving = *at_b;
  if (backlog_b > current) {
    serving = std::max(serving, CapacityOn(ThreadCounts(active.groups), backlog_b).value_or(0));
  }
  // The arrivals over the window, and over twice and four times it (a smaller excess takes
  // longer to tell from chance), against what the set serves fully busy: a burst the set rides
  // out must not cost a switch that starts runtimes, which on busy CPUs queues more than the
  // burst did. A move that starts none (a change of b, or parked runtimes) costs nothing and is
  // taken already when the arrivals exceed max_utilization of it: a set run that busy builds a
  // queue in every burst (BERT-like at 12.3 rows/s on a B = 1 plan predicted to serve 13.8:
  // p99 2.0 s, for the 33 s until the estimator moved).
  const double max_utilization = config_.reconfiguration.max_utilization;
  const RateOverFn rate_over = [this](int64_t ms) {
    return arrival_rate_.Over(std::chrono::milliseconds(ms));
  };
  std::optional<double> rate = OverloadedRate(window_ms, serving, rate_over);
  const bool busy_only = !rate;  // above max_utilization, not above capacity
  if (busy_only && max_utilization < 1) {
    rate = OverloadedRate(window_ms, max_utilization * serving, rate_over);
  }
  if (!rate) return false;  // it keeps up, if barely: the estimator's call
  arriving = rate;
  plans.clear();
  const std::optional<int64_t> b =
      BatchForRate(*rate, backlog_b, config_.batching.max_batch, max_utilization, capacity);
  if (!b) return false;  // nothing serves more: the queue bounds what waits (429 beyond it)
  const PlanChoice& target = *plans.at(*b);
  const Plan& plan = target.plan;
  if (busy_only && StartsRuntimes(plan, active)) return false;
  std::ostringstream reason;
  reason.precision(3);
  reason << "overloaded: " << *rate << " rows/s arriving, the plan for B=" << current << " serves "
         << serving;
  if (backlog_b > current) reason << " in batches of up to " << backlog_b;
  if (busy_only)
    reason << " (more than " << max_utilization << " of it; the move starts no runtime)";
  reason << "; B " << current << " -> " << *b << " serves " << target.capacity
         << PassedOverNote(plan, target.passed_over, config_.reconfiguration.restart_margin,
                           generative());
  // Either way the next try waits for a new window.
  arrival_rate_.Restart();
  if (Status s = Reconfigure(plan.groups, plan, reason.str(), false); !s.ok()) {
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "': reconfiguration failed, the current "
                       << "set keeps serving: " << s.message();
    return true;
  }
  // What the estimator saw while the old plan fell behind (a backlog) says nothing about the
  // new one.
  last_overload_move_ = std::chrono::steady_clock::now();
  backlog_ = true;
  estimator_.Restart();
  return true;
}

void ServedModel::OnWorkerDeath(std::vector<WorkSlice> orphans, const std::string& why) {
  std::vector<std::shared_ptr<Worker>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_) {
      for (const auto& w : active_->workers) {
        if (w->alive()) live.push_back(w);
      }
    }
  }
  int retried = 0;
  for (WorkSlice& slice : orphans) {
    RuntimeInstance* target = nullptr;
    if (!slice.retried) {
      for (const auto& w : live) {
        if (w->instance && w->instance->batch_size() >= slice.rows &&
            (!target || w->instance->load() < target->load())) {
          target = w->instance.get();
        }
      }
    }
    if (target) {
      slice.retried = true;
      ++retried;
      target->Enqueue(std::move(slice));
    } else {
      FailSlice(slice, Unavailable(why));
      if (slice.on_done) slice.on_done();
    }
  }
  PACKRAT_LOG(WARNING) << "model '" << config_.name << "': " << retried << " of " << orphans.size()
                       << " slice(s) of the dead runtime retried";
  RestartSoon();
}

void ServedModel::RestartSoon() {
  Post([this] {
    // Run by Stop() on its own thread once the control thread stops: then nothing restarts,
    // and last_restart_ (the control thread's) must not be touched.
    if (state() != ModelState::kReady) return;
    last_restart_ = SteadyTime{};  // restart at the next tick, without the backoff
    Tick(std::chrono::steady_clock::now());
  });
}

void ServedModel::PublishInstancesLocked() {
  if (options_.metrics == nullptr) return;
  std::vector<metrics::InstanceCount> counts;
  if (active_) {
    for (const InstanceGroup& g : active_->groups) {
      counts.push_back({g.threads, g.batch, "ready", g.count});
    }
  }
  for (const auto& set : draining_) {
    for (const InstanceGroup& g : set->groups) {
      counts.push_back({g.threads, g.batch, "draining", g.count});
    }
  }
  for (const auto& w : parked_)
    counts.push_back({w->threads, static_cast<int>(w->batch), "parked", 1});
  options_.metrics->SetInstances(counts);
}

void ServedModel::ObserveComputed(const Profile* profile, int threads, int64_t rows,
                                  std::chrono::nanoseconds compute, std::map<int64_t, int>* seen) {
  if (metrics::ModelMetrics* m = options_.metrics) {
    m->batch_size().Observe(static_cast<double>(rows));
    m->compute_duration().Observe(std::chrono::duration<double>(compute).count());
  }
  if (profile == nullptr || (*seen)[rows]++ < kColdSlices) return;
  const std::optional<double> predicted = profile->InterpolatedLatency(threads, rows);
  if (!predicted || *predicted <= 0) return;
  const double ratio = std::clamp(
      std::chrono::duration<double, std::milli>(compute).count() / *predicted, 0.25, 4.0);
  slowdowns_.Record(threads, ratio,
                    std::chrono::steady_clock::now() -
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(compute));
}

DispatchObserver ServedModel::MakeDispatchObserver() {
  metrics::ModelMetrics* m = options_.metrics;
  if (m == nullptr) return {};
  DispatchObserver observer;
  observer.dispatched = [m](const Batch& batch, SteadyTime now) {
    for (const auto& request : batch.requests) {
      m->queue_duration().Observe(std::chrono::duration<double>(now - request->arrival()).count());
    }
  };
  // An exponentially weighted average (α = 0.2) of whole-batch latency, next to the plan's
  // predicted latency: how far reality is from the profile.
  observer.finished = [this, m](int64_t, std::chrono::duration<double> took) {
    double old = measured_batch_seconds_.load(std::memory_order_relaxed);
    double next;
    do {
      next = old == 0 ? took.count() : 0.8 * old + 0.2 * took.count();
    } while (!measured_batch_seconds_.compare_exchange_weak(old, next));
    m->measured_batch_latency().Set(next);
  };
  return observer;
}

}  // namespace packrat
