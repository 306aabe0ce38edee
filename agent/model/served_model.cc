#include "agent/model/served_model.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "agent/batching/slice_io.h"
#include "agent/model/dispatch_metrics.h"
#include "agent/planning/plan_evaluator.h"
#include "agent/pool/cpu_list.h"
#include "common/logging.h"

namespace packrat {
ServedModel::ServedModel(ModelConfig config, ServedModelOptions options, ProcessLauncher* launcher)
    : config_(std::move(config)),
      signature_(config_.Signature()),
      options_(std::move(options)),
      launcher_(launcher),
      revision_(options_.on_change),
      slowdowns_(/*alpha=*/0.1, /*min_slices=*/8, config_.reconfiguration.slowdown_floor),
      starter_(config_,
               WorkerStarterOptions{options_.runtime_path, options_.allocator, options_.cpusets,
                                    launcher, options_.runtime_idle_spin_us,
                                    ResizableRuntimes() ? config_.batching.max_batch : 0},
               WorkerHooks{
                   [this](int t, const SliceTiming& s, auto* seen) { ObserveComputed(t, s, seen); },
                   [this](std::vector<WorkSlice> orphans, const std::string& why) {
                     sets_.RetryOrphans(std::move(orphans), why);
                     controller_->RestartSoon();
                   },
                   [this](const std::string&) { controller_->RestartSoon(); },  // sequences failed
                   config_.batching.mode == BatchingMode::kLayered
                       ? std::function<TopUpSource(int)>(
                             [this](int threads) { return layered_->SourceFor(threads); })
                       : nullptr,
                   [this] { return backlog_rows() > 0; }}),
      sets_(InstanceSetsOptions{config_.name, ResizableRuntimes(), ParkLimit(),
                                std::chrono::seconds(config_.reconfiguration.drain_timeout_s),
                                options_.allocator, options_.metrics, &slowdowns_, &revision_},
            &starter_,
            SetHooks{[this](uint64_t generation, std::vector<InstanceGroup> groups,
                            std::optional<Plan> plan, std::vector<std::shared_ptr<Worker>> workers,
                            std::vector<int64_t> batches) {
                       return MakeSet(generation, std::move(groups), std::move(plan),
                                      std::move(workers), std::move(batches));
                     },
                     [this](const InstanceSet& next) { Switched(next); },
                     [this](const std::vector<InstanceGroup>& groups) {
                       return layered_ ? layered_->Prepare(groups) : Status::Ok();
                     }}) {
  if (config_.batching.mode == BatchingMode::kLayered) {
    layered_ = std::make_unique<LayeredBatching>(
        config_, LayeredBatchingOptions{options_.runtime_path, options_.profile_dir,
                                        options_.allocator, launcher_, options_.metrics});
  }
  // Where an input's row size varies, the smallest input slab a runtime of this model has: one
  // row of each fixed-size input, and the room of each varying one. Fixed rows always fit.
  if (std::any_of(config_.inputs.begin(), config_.inputs.end(),
                  [](const TensorSpec& t) { return t.RowBytes() < 0; })) {
    smallest_input_slab_ =
        SlabBytes(config_.inputs, 1, static_cast<uint64_t>(config_.batching.variable_tensor_bytes));
  }
}

ServedModel::~ServedModel() { Stop(std::chrono::seconds(5)); }

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kFailed:
      return "FAILED";
    case ModelState::kStopped:
      return "STOPPED";
  }
  return "UNKNOWN";
}

void ServedModel::SetState(ModelState state) {
  state_.store(state, std::memory_order_release);
  revision_.Bump();
}

std::string ServedModel::failure() const {
  MutexLock lock(&mu_);
  return failure_;
}

std::string ServedModel::status_detail() const {
  MutexLock lock(&mu_);
  if (state() == ModelState::kFailed) return failure_;
  if (state() != ModelState::kLoading) return "";
  const std::string profiling = profiling_ ? profiling_->Status() : "";
  return profiling.empty() ? "starting runtimes" : profiling;
}

std::vector<pid_t> ServedModel::instance_pids() const {
  std::vector<pid_t> pids;
  const ServingSnapshot s = Snapshot();
  for (const WorkerInfo& w : s.workers) pids.push_back(w.pid);
  for (const WorkerInfo& w : s.parked) pids.push_back(w.pid);
  return pids;
}

std::vector<InstanceGroup> ServedModel::groups() const {
  const std::shared_ptr<InstanceSet> active = sets_.active();
  return active ? active->groups : std::vector<InstanceGroup>();
}

std::optional<Plan> ServedModel::optimizer_plan() const {
  const std::shared_ptr<InstanceSet> active = sets_.active();
  return active ? active->plan : std::nullopt;
}

std::string ServedModel::load_report() const {
  const std::shared_ptr<InstanceSet> active = sets_.active();
  if (!active || active->workers.empty()) return "";
  return active->workers.front()->load_report();
}

ServingSnapshot ServedModel::Snapshot() const {
  ServingSnapshot s;
  sets_.Fill(&s);
  if (controller_) {
    const ControllerSnapshot c = controller_->Snapshot();
    s.ewma = c.ewma;
    s.estimate = c.estimate;
    s.adaptive = c.adaptive;
    s.last_hold = c.last_hold;
    s.moves = c.moves;
  }
  s.thread_budget = ThreadBudget();
  s.revision = revision_.current();
  return s;
}

bool ServedModel::ResizableRuntimes() const {
  return config_.auto_instances && config_.batching.max_batch > 0 &&
         (generative() || config_.batching.mode == BatchingMode::kBatched);
}

StatusOr<std::vector<InstanceGroup>> ServedModel::ResolvePlan(std::optional<Plan>* plan_out) {
  if (!config_.auto_instances) return config_.instances;
  const int threads = config_.auto_threads > 0 ? config_.auto_threads : ThreadBudget();
  if (threads < 1) return FailedPrecondition("no usable cores to plan for");
  const std::vector<int> cores = PlanningCpus(config_, options_.allocator);
  auto progress =
      std::make_shared<ProfilingProgress>(config_.name, options_.metrics, options_.clock);
  {
    MutexLock lock(&mu_);
    profiling_ = progress;
  }
  ASSIGN_OR_RETURN(Profile profile,
                   LoadModelProfile(config_, threads, cores, options_.runtime_path,
                                    options_.profile_dir, launcher_, progress.get()));
  optimizer_ = std::make_unique<Optimizer>(std::move(profile));
  ASSIGN_OR_RETURN(Plan plan, FirstPlan(config_, *optimizer_, threads));
  std::vector<InstanceGroup> groups = plan.groups;
  *plan_out = std::move(plan);
  return groups;
}

std::shared_ptr<InstanceSet> ServedModel::MakeSet(uint64_t generation,
                                                  std::vector<InstanceGroup> groups,
                                                  std::optional<Plan> plan,
                                                  std::vector<std::shared_ptr<Worker>> workers,
                                                  std::vector<int64_t> batches) {
  auto set = std::make_shared<InstanceSet>();
  set->generation = generation;
  set->target_rows = layered_ ? layered_->BatchTarget(groups) : TargetRows(groups);
  set->backlog_rows = controller_->autoscaler().BacklogRows(
      groups, set->target_rows, [this](int threads) { return slowdowns_.Get(threads); });
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
  const int inflight =
      layered_ ? static_cast<int>(executors.size()) : config_.batching.max_inflight_batches;
  set->dispatcher = std::make_shared<Dispatcher>(
      executors, inflight,
      [this] {
        if (scheduler_) scheduler_->Notify();
      },
      set->batches);
  set->dispatcher->set_whole_batches(layered_ != nullptr);
  set->dispatcher->set_observer(MetricsObserver(options_.metrics));
  return set;
}

void ServedModel::Switched(const InstanceSet& next) {
  if (scheduler_) {
    scheduler_->SwapDispatcher(next.dispatcher, next.target_rows, next.backlog_rows);
  }
  if (layered_) layered_->SetHintTargets(next);
  if (metrics::ModelMetrics* m = options_.metrics) {
    m->target_batch().Set(static_cast<double>(next.target_rows));
    m->generation().Set(static_cast<double>(next.generation));
    if (next.plan) m->predicted_batch_latency().Set(next.plan->latency_ms / 1e3);
  }
}

void ServedModel::MakeController() {
  const int threads = config_.auto_threads > 0 ? config_.auto_threads : ThreadBudget();
  ModelControllerOptions c;
  c.model_name = config_.name;
  c.clock = options_.clock;
  c.sets = &sets_;
  c.slowdowns = &slowdowns_;
  c.metrics = options_.metrics;
  c.revision = &revision_;
  c.adaptive = config_.auto_instances && config_.reconfiguration.adaptive;
  c.rows_in_system = [this] { return RowsInSystem(); };
  c.rows_arrived = [this] { return rows_arrived_.load(std::memory_order_relaxed); };
  // Ticks run only while the model serves, after Load has set scheduler_ (once).
  c.oldest_queued = [this]() -> std::optional<SteadyTime> {
    if (scheduler_ == nullptr) return std::nullopt;
    return scheduler_->oldest_queued_arrival();
  };
  c.serving = [this] { return state() == ModelState::kReady; };
  controller_ = std::make_unique<ModelController>(
      std::move(c),
      Autoscaler(AutoscalerOptionsFor(config_, std::max(1, threads), ResizableRuntimes()),
                 optimizer_.get()),
      LoadTrackerFor(config_), optimizer_.get());
}

Status ServedModel::LoadFailed(const Status& status, const std::vector<InstanceGroup>& groups) {
  MutexLock lock(&mu_);
  failure_ = status.message();
  if (state_.load() != ModelState::kStopped) SetState(ModelState::kFailed);
  if (options_.metrics) {
    std::vector<metrics::InstanceCount> counts;
    for (const InstanceGroup& g : groups) counts.push_back({g.threads, g.batch, "failed", g.count});
    options_.metrics->SetInstances(counts);
  }
  PACKRAT_LOG(ERROR) << "model '" << config_.name << "' failed to load: " << status.message();
  return status;
}

Status ServedModel::Load() {
  std::optional<Plan> plan;
  std::vector<InstanceGroup> groups;
  StatusOr<std::shared_ptr<InstanceSet>> started = FailedPrecondition("not started");
  Status status;
  if (auto resolved = ResolvePlan(&plan); resolved.ok()) {
    groups = std::move(resolved).value();
    status = ValidatePlan(groups);
  } else {
    status = resolved.status();
  }
  if (status.ok()) {
    MakeController();
    started = sets_.StartFirst(groups, plan);
    status = started.status();
  }
  if (!status.ok()) return LoadFailed(status, groups);
  std::shared_ptr<InstanceSet> set = std::move(started).value();
  BatchAggregator::Options batching;
  batching.target_rows = set->target_rows;
  batching.max_delay = std::chrono::microseconds(layered_ ? 0 : config_.batching.max_delay_us);
  batching.max_queue_rows = config_.batching.max_queue_rows;
  // Rows queued beyond B run in larger slices (the runtimes' slabs hold max_batch rows), as
  // large as still serves more rows per second, while the estimator or the overload path
  // finds the plan for the load.
  batching.max_rows = set->backlog_rows;
  {
    MutexLock lock(&mu_);
    if (state_.load() == ModelState::kStopped) {  // Stop() raced with loading
      return Unavailable("model stopped while loading");
    }
    if (!generative()) scheduler_ = std::make_unique<BatchScheduler>(batching, set->dispatcher);
    if (layered_) {
      layered_->set_scheduler(scheduler_.get());
      layered_->SetHintTargets(*set);
      scheduler_->set_queue_observer([this](int64_t rows) { layered_->QueuedRows(rows); });
    }
    sets_.Install(set);
    if (metrics::ModelMetrics* m = options_.metrics) {
      Switched(*set);  // B, generation and predicted latency (the scheduler has this set)
      if (BatchScheduler* scheduler = scheduler_.get()) {
        queue_rows_metric_ =
            m->BindQueueRows([scheduler] { return static_cast<double>(scheduler->queued_rows()); });
      }
      runtimes_metric_ = m->BindRuntimes([this] { return instance_pids(); });
      m->SetKernel(set->workers.front()->load_report(), config_.kernel.Key());
    }
    SetState(ModelState::kReady);
    controller_->Start();
  }
  PACKRAT_LOG(INFO) << "model '" << config_.name << "' ready: " << set->workers.size()
                    << " instance(s) " << GroupsString(groups) << ", B=" << set->target_rows
                    << (set->backlog_rows > set->target_rows
                            ? " (a backlog runs in batches of up to " +
                                  std::to_string(set->backlog_rows) + ")"
                            : std::string());
  return Status::Ok();
}

int64_t ServedModel::RowsInSystem() const {
  if (!generative()) return rows_in_system_->load(std::memory_order_relaxed);
  int64_t load = 0;
  if (const std::shared_ptr<InstanceSet> active = sets_.active()) {
    for (const auto& w : active->workers) {
      if (w->decoder) load += static_cast<int64_t>(w->decoder->load());
    }
  }
  return load;
}

Status ServedModel::Submit(std::shared_ptr<InferenceRequest> request) {
  if (generative()) {
    return FailedPrecondition("model '" + config_.name + "' is generative: use POST /v2/models/" +
                              config_.name + "/generate");
  }
  if (state() != ModelState::kReady) {
    return FailedPrecondition("model '" + config_.name + "' is not ready");
  }
  RETURN_IF_ERROR(CheckRowFits(*request, smallest_input_slab_, config_.name,
                               config_.batching.variable_tensor_bytes));
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
    MutexLock lock(&mu_);
    if (state_.load() == ModelState::kStopped) return;
    SetState(ModelState::kStopped);
  }
  const auto deadline = std::chrono::steady_clock::now() + drain;
  if (controller_) controller_->Stop();            // plan changes queued get their answer
  queue_rows_metric_ = metrics::CallbackHandle();  // before the scheduler it reads goes away
  runtimes_metric_ = metrics::CallbackHandle();    // before the sets it reads go away
  if (scheduler_) {
    scheduler_->Drain(deadline);
    scheduler_->Stop();
  }
  sets_.StopAll(deadline);
}

Status ServedModel::ValidatePlan(const std::vector<InstanceGroup>& groups) const {
  const ResourceAllocator* allocator = options_.allocator;
  std::string cores = allocator ? allocator->topology().Describe() : "";
  if (allocator) {
    if (auto share = allocator->Share(config_.name)) {
      cores = "its share of the node, CPUs " + FormatCpuList(*share);
    }
  }
  return ValidatePlanGroups(groups, ThreadBudget(), cores);
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
  controller_->Post([this, change = std::move(change), done = std::move(done)]() mutable {
    if (state() != ModelState::kReady) {
      return done(Unavailable("model '" + config_.name + "' is stopping"));
    }
    done(controller_->ApplyChange(change));
  });
}

void ServedModel::ObserveComputed(int threads, const SliceTiming& timing,
                                  std::map<int64_t, int>* seen) {
  const auto [rows, took] = std::pair(timing.rows, timing.compute);
  if (metrics::ModelMetrics* m = options_.metrics) {
    m->Executed(rows, timing.requests, timing.input, took, timing.output);
  }
  if (optimizer_ == nullptr || (*seen)[rows]++ < kColdSlices) return;
  const std::optional<double> predicted = optimizer_->profile().InterpolatedLatency(threads, rows);
  if (!predicted || *predicted <= 0) return;
  const double ratio =
      std::clamp(std::chrono::duration<double, std::milli>(took).count() / *predicted, 0.25, 4.0);
  slowdowns_.Record(threads, ratio,
                    std::chrono::steady_clock::now() -
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(took));
}

bool ServedModel::PartitionCandidate() const {
  return config_.auto_instances && config_.auto_threads == 0 && !generative() &&
         config_.batching.mode == BatchingMode::kBatched;
}

std::optional<ControllerSnapshot> ServedModel::controller_snapshot() const {
  if (state() != ModelState::kReady || !controller_) return std::nullopt;
  return controller_->Snapshot();
}

int64_t ServedModel::backlog_rows() const {
  if (generative() || state() != ModelState::kReady) return 0;
  const std::shared_ptr<InstanceSet> active = sets_.active();
  const int64_t running = active ? 2 * active->target_rows : 0;
  return std::max<int64_t>(0, RowsInSystem() - running);
}

std::vector<std::vector<int>> ServedModel::ServingCpus() const {
  std::vector<std::vector<int>> cpus;
  if (const std::shared_ptr<InstanceSet> active = sets_.active()) {
    for (const auto& w : active->workers) {
      if (w->alive() && !w->placement.cpus.empty()) cpus.push_back(w->placement.cpus);
    }
  }
  return cpus;
}

bool ServedModel::ShrinkKeeps(const std::vector<int>& cpus, const Plan& plan, double rate) const {
  if (state() != ModelState::kReady || !controller_) return false;
  const Autoscaler& policy = controller_->autoscaler();
  if (!policy.options().resizable_runtimes || RowsInSystem() == 0) return true;
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  const std::vector<int> keepable = sets_.ThreadsInside(sorted);
  const std::optional<double> at = rate > 0 ? std::optional<double>(rate) : std::nullopt;
  const SlowdownFn slowdown = [this](int threads) { return slowdowns_.Get(threads); };
  const int budget = static_cast<int>(cpus.size());
  return policy.KeepingPlan(keepable, plan, at, slowdown, ModelController::kResizeMargin, budget)
      .has_value();
}

void ServedModel::Resize(ResizeRequest request, std::function<void(Status)> done) {
  if (state() != ModelState::kReady || !controller_) {
    return done(FailedPrecondition("model '" + config_.name + "' is not ready"));
  }
  controller_->Post([this, request = std::move(request), done = std::move(done)] {
    if (state() != ModelState::kReady) {
      return done(Unavailable("model '" + config_.name + "' is stopping"));
    }
    done(controller_->Resize(request));
  });
}

}  // namespace packrat
