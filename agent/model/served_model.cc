#include "agent/model/served_model.h"

#include "agent/profiling/profile_store.h"
#include "common/logging.h"

namespace packrat {

ServedModel::ServedModel(ModelConfig config, ServedModelOptions options, ProcessLauncher* launcher)
    : config_(std::move(config)),
      signature_(config_.Signature()),
      options_(std::move(options)),
      launcher_(launcher) {}

ServedModel::~ServedModel() { Stop(std::chrono::seconds(5)); }

std::string ServedModel::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::vector<pid_t> ServedModel::instance_pids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<pid_t> pids;
  for (const auto& i : instances_) pids.push_back(i->pid());
  return pids;
}

std::vector<InstanceGroup> ServedModel::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

std::optional<Plan> ServedModel::optimizer_plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_;
}

StatusOr<std::vector<InstanceGroup>> ServedModel::ResolvePlan() {
  if (!config_.auto_instances) return config_.instances;
  const int threads =
      config_.auto_threads > 0 ? config_.auto_threads : static_cast<int>(options_.cores.size());
  const int batch = static_cast<int>(config_.batching.max_batch);
  if (threads < 1) return FailedPrecondition("no usable cores to plan for");
  ProfilerOptions profiling;
  profiling.model = config_;
  profiling.runtime_path = options_.runtime_path;
  profiling.cores = options_.cores;
  for (int t = 1; t <= std::min<int>(threads, static_cast<int>(options_.cores.size())); ++t) {
    profiling.threads.push_back(t);
  }
  profiling.batches = PowersOfTwoUpTo(batch);
  ASSIGN_OR_RETURN(Profile profile,
                   LoadOrMeasureProfile(options_.profile_dir, profiling, launcher_, nullptr));
  Optimizer optimizer(std::move(profile));
  ASSIGN_OR_RETURN(Plan plan, optimizer.Solve(threads, batch));
  PACKRAT_LOG(INFO) << "model '" << config_.name << "': plan for T=" << threads << ", B=" << batch
                    << ": " << plan.ConfigString() << ", predicted " << plan.latency_ms
                    << " ms per batch"
                    << (plan.fat_latency_ms
                            ? " (fat instance: " + std::to_string(*plan.fat_latency_ms) + " ms)"
                            : std::string());
  std::vector<InstanceGroup> groups = plan.groups;
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = std::move(plan);
  return groups;
}

Status ServedModel::Load() {
  std::vector<std::unique_ptr<RuntimeInstance>> instances;
  Status status;
  std::vector<InstanceGroup> groups;
  if (auto resolved = ResolvePlan(); resolved.ok()) {
    groups = std::move(resolved).value();
  } else {
    status = resolved.status();
  }
  std::vector<int> threads;
  for (const InstanceGroup& g : groups) {
    for (int k = 0; k < g.count; ++k) threads.push_back(g.threads);
  }
  const std::vector<std::vector<int>> cores =
      options_.assign_cores ? options_.assign_cores(threads) : std::vector<std::vector<int>>();
  int index = 0;
  for (const InstanceGroup& group : groups) {
    for (int k = 0; k < group.count && status.ok(); ++k, ++index) {
      RuntimeInstanceOptions o;
      o.model_name = config_.name;
      o.index = index;
      o.runtime_path = options_.runtime_path;
      o.model_path = config_.path;
      o.threads = group.threads;
      o.batch = group.batch;
      if (static_cast<size_t>(index) < cores.size()) o.cores = cores[index];
      o.inputs = config_.inputs;
      o.outputs = config_.outputs;
      o.warmup_iterations = config_.warmup_iterations;
      o.startup_timeout = std::chrono::seconds(config_.startup_timeout_s);
      if (metrics::ModelMetrics* m = options_.metrics) {
        o.on_slice_computed = [m](int64_t rows, std::chrono::nanoseconds compute) {
          m->batch_size().Observe(static_cast<double>(rows));
          m->compute_duration().Observe(std::chrono::duration<double>(compute).count());
        };
      }
      auto instance = RuntimeInstance::Start(o, launcher_);
      if (!instance.ok()) {
        status = instance.status();
        break;
      }
      instances.push_back(std::move(instance).value());
    }
  }
  if (!status.ok()) {
    for (auto& i : instances) i->Stop(std::chrono::milliseconds(0));
    {
      std::lock_guard<std::mutex> lock(mu_);
      failure_ = status.message();
      if (state_.load() != ModelState::kStopped) state_.store(ModelState::kFailed);
    }
    PublishInstances(groups, "failed");
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "' failed to load: " << status.message();
    return status;
  }

  std::vector<InstanceExecutor*> executors;
  for (auto& i : instances) executors.push_back(i.get());
  BatchAggregator::Options batching;
  batching.target_rows = 0;
  for (const InstanceGroup& g : groups) batching.target_rows += int64_t{g.count} * g.batch;
  batching.max_delay = std::chrono::microseconds(config_.batching.max_delay_us);
  batching.max_queue_rows = config_.batching.max_queue_rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load() == ModelState::kStopped) {  // Stop() raced with loading
      for (auto& i : instances) i->Stop(std::chrono::milliseconds(0));
      return Unavailable("model stopped while loading");
    }
    instances_ = std::move(instances);
    groups_ = groups;
    dispatcher_ =
        std::make_unique<Dispatcher>(executors, config_.batching.max_inflight_batches, [this] {
          if (scheduler_) scheduler_->Notify();
        });
    dispatcher_->set_observer(MakeDispatchObserver());
    scheduler_ = std::make_unique<BatchScheduler>(batching, dispatcher_.get());
    if (metrics::ModelMetrics* m = options_.metrics) {
      m->target_batch().Set(static_cast<double>(batching.target_rows));
      if (plan_) m->predicted_batch_latency().Set(plan_->latency_ms / 1e3);
      BatchScheduler* scheduler = scheduler_.get();
      queue_rows_metric_ =
          m->BindQueueRows([scheduler] { return static_cast<double>(scheduler->queued_rows()); });
    }
    state_.store(ModelState::kReady, std::memory_order_release);
  }
  PublishInstances(groups, "ready");
  PACKRAT_LOG(INFO) << "model '" << config_.name << "' ready: " << instances_.size()
                    << " instance(s), B=" << batching.target_rows;
  return Status::Ok();
}

Status ServedModel::Submit(std::shared_ptr<InferenceRequest> request) {
  if (state() != ModelState::kReady) {
    return FailedPrecondition("model '" + config_.name + "' is not ready");
  }
  return scheduler_->Submit(std::move(request));
}

void ServedModel::Stop(std::chrono::milliseconds drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load() == ModelState::kStopped) return;
    state_.store(ModelState::kStopped, std::memory_order_release);
  }
  const auto deadline = std::chrono::steady_clock::now() + drain;
  queue_rows_metric_ = metrics::CallbackHandle();  // before the scheduler it reads goes away
  if (scheduler_) {
    scheduler_->Drain(deadline);
    scheduler_->Stop();
  }
  for (auto& i : instances_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    i->Stop(std::max(left, std::chrono::milliseconds(0)));
  }
}

void ServedModel::PublishInstances(const std::vector<InstanceGroup>& groups,
                                   const std::string& state) {
  if (options_.metrics == nullptr) return;
  std::vector<metrics::InstanceCount> counts;
  for (const InstanceGroup& g : groups) counts.push_back({g.threads, g.batch, state, g.count});
  options_.metrics->SetInstances(counts);
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
