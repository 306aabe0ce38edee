#include "agent/model/served_model.h"

#include "common/logging.h"

namespace packrat {

ServedModel::ServedModel(ModelConfig config, std::string runtime_path, ProcessLauncher* launcher,
                         std::vector<std::vector<int>> cores)
    : config_(std::move(config)),
      signature_(config_.Signature()),
      runtime_path_(std::move(runtime_path)),
      launcher_(launcher),
      cores_(std::move(cores)) {}

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

Status ServedModel::Load() {
  std::vector<std::unique_ptr<RuntimeInstance>> instances;
  int index = 0;
  Status status;
  for (const InstanceGroup& group : config_.instances) {
    for (int k = 0; k < group.count && status.ok(); ++k, ++index) {
      RuntimeInstanceOptions o;
      o.model_name = config_.name;
      o.index = index;
      o.runtime_path = runtime_path_;
      o.model_path = config_.path;
      o.threads = group.threads;
      o.batch = group.batch;
      if (static_cast<size_t>(index) < cores_.size()) o.cores = cores_[index];
      o.inputs = config_.inputs;
      o.outputs = config_.outputs;
      o.warmup_iterations = config_.warmup_iterations;
      o.startup_timeout = std::chrono::seconds(config_.startup_timeout_s);
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
    PACKRAT_LOG(ERROR) << "model '" << config_.name << "' failed to load: " << status.message();
    return status;
  }

  std::vector<InstanceExecutor*> executors;
  for (auto& i : instances) executors.push_back(i.get());
  BatchAggregator::Options batching;
  batching.target_rows = config_.TargetBatch();
  batching.max_delay = std::chrono::microseconds(config_.batching.max_delay_us);
  batching.max_queue_rows = config_.batching.max_queue_rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.load() == ModelState::kStopped) {  // Stop() raced with loading
      for (auto& i : instances) i->Stop(std::chrono::milliseconds(0));
      return Unavailable("model stopped while loading");
    }
    instances_ = std::move(instances);
    dispatcher_ = std::make_unique<Dispatcher>(executors, config_.batching.max_inflight_batches,
                                               [this] {
                                                 if (scheduler_) scheduler_->Notify();
                                               });
    scheduler_ = std::make_unique<BatchScheduler>(batching, dispatcher_.get());
    state_.store(ModelState::kReady, std::memory_order_release);
  }
  PACKRAT_LOG(INFO) << "model '" << config_.name << "' ready: " << instances_.size()
                    << " instance(s), B=" << config_.TargetBatch();
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

}  // namespace packrat
