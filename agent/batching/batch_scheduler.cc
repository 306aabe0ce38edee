#include "agent/batching/batch_scheduler.h"

namespace packrat {

BatchScheduler::BatchScheduler(BatchAggregator::Options options,
                               std::shared_ptr<Dispatcher> dispatcher)
    : dispatcher_(std::move(dispatcher)), aggregator_(options) {
  thread_ = std::thread([this] { Loop(); });
}

BatchScheduler::~BatchScheduler() { Stop(); }

Status BatchScheduler::Submit(std::shared_ptr<InferenceRequest> request) {
  std::optional<Batch> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || draining_) return Unavailable("the model is shutting down");
    RETURN_IF_ERROR(aggregator_.Enqueue(std::move(request)));
    if (dispatcher_->HasCapacity()) batch = aggregator_.Poll(std::chrono::steady_clock::now());
  }
  if (batch) {
    std::shared_lock<std::shared_mutex> dispatching(dispatch_mu_);
    dispatcher_->Dispatch(std::move(*batch));
  } else {
    cv_.notify_one();
  }
  return Status::Ok();
}

void BatchScheduler::Notify() {
  { std::lock_guard<std::mutex> lock(mu_); }  // orders the wake-up after the waiter's check
  cv_.notify_one();
}

void BatchScheduler::Drain(SteadyTime deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  cv_.notify_one();
  drained_cv_.wait_until(lock, deadline, [&] { return aggregator_.queued_rows() == 0; });
}

void BatchScheduler::Stop() {
  std::vector<std::shared_ptr<InferenceRequest>> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    orphans = aggregator_.TakeAll();
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (auto& r : orphans) r->FailRows(r->rows(), Unavailable("the model is shutting down"));
}

void BatchScheduler::SwapDispatcher(std::shared_ptr<Dispatcher> next, int64_t target_rows) {
  std::unique_lock<std::shared_mutex> dispatching(dispatch_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    dispatcher_ = std::move(next);
    aggregator_.set_target_rows(target_rows);
  }
  cv_.notify_one();
}

int64_t BatchScheduler::rows_in_system() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aggregator_.queued_rows() + dispatcher_->inflight_rows();
}

int64_t BatchScheduler::queued_rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aggregator_.queued_rows();
}

void BatchScheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (dispatcher_->HasCapacity()) {
      const SteadyTime now = draining_ ? SteadyTime::max() : std::chrono::steady_clock::now();
      if (std::optional<Batch> batch = aggregator_.Poll(now)) {
        lock.unlock();
        {
          std::shared_lock<std::shared_mutex> dispatching(dispatch_mu_);
          dispatcher_->Dispatch(std::move(*batch));
        }
        lock.lock();
        if (aggregator_.queued_rows() == 0) drained_cv_.notify_all();
        continue;
      }
      if (const auto deadline = aggregator_.NextDeadline()) {
        cv_.wait_until(lock, *deadline);
        continue;
      }
    }
    cv_.wait(lock);
  }
}

}  // namespace packrat
