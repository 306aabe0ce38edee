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
    MutexLock lock(&mu_);
    if (stop_ || draining_) return Unavailable("the model is shutting down");
    RETURN_IF_ERROR(aggregator_.Enqueue(std::move(request)));
    if (const int64_t room = dispatcher_->Room(); room > 0) {
      batch = aggregator_.Poll(std::chrono::steady_clock::now(), room);
    }
    if (queue_observer_) queue_observer_(aggregator_.queued_rows());
  }
  if (batch) {
    std::shared_lock<std::shared_mutex> dispatching(dispatch_mu_);
    dispatcher_->Dispatch(std::move(*batch));
  } else {
    cv_.NotifyOne();
  }
  return Status::Ok();
}

void BatchScheduler::Notify() {
  { MutexLock lock(&mu_); }  // orders the wake-up after the waiter's check
  cv_.NotifyOne();
}

void BatchScheduler::Drain(SteadyTime deadline) {
  MutexLock lock(&mu_);
  draining_ = true;
  cv_.NotifyOne();
  while (aggregator_.queued_rows() > 0 && drained_cv_.WaitUntil(&mu_, deadline)) {
  }
}

void BatchScheduler::Stop() {
  std::vector<std::shared_ptr<InferenceRequest>> orphans;
  {
    MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    orphans = aggregator_.TakeAll();
    if (queue_observer_) queue_observer_(0);
  }
  cv_.NotifyOne();
  if (thread_.joinable()) thread_.join();
  for (auto& r : orphans) r->FailRows(r->rows(), Unavailable("the model is shutting down"));
}

void BatchScheduler::SwapDispatcher(std::shared_ptr<Dispatcher> next, int64_t target_rows,
                                    int64_t max_rows) {
  std::unique_lock<std::shared_mutex> dispatching(dispatch_mu_);
  {
    MutexLock lock(&mu_);
    dispatcher_ = std::move(next);
    aggregator_.set_target_rows(target_rows);
    aggregator_.set_max_rows(max_rows);
  }
  cv_.NotifyOne();
}

std::vector<std::shared_ptr<InferenceRequest>> BatchScheduler::TakeFront(
    const std::function<bool(const InferenceRequest& request, int64_t rows)>& admit) {
  MutexLock lock(&mu_);
  auto taken = aggregator_.TakeFront(admit);
  if (!taken.empty() && queue_observer_) queue_observer_(aggregator_.queued_rows());
  if (aggregator_.queued_rows() == 0) drained_cv_.NotifyAll();
  return taken;
}

int64_t BatchScheduler::queued_rows() const {
  MutexLock lock(&mu_);
  return aggregator_.queued_rows();
}

std::optional<SteadyTime> BatchScheduler::oldest_queued_arrival() const {
  MutexLock lock(&mu_);
  return aggregator_.OldestArrival();
}

void BatchScheduler::Loop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (auto expired = aggregator_.TakeExpired(now); !expired.empty()) {
      if (queue_observer_) queue_observer_(aggregator_.queued_rows());
      if (aggregator_.queued_rows() == 0) drained_cv_.NotifyAll();
      mu_.Unlock();
      for (auto& r : expired) {
        r->FailRows(
            r->rows(),
            DeadlineExceeded("the request timed out after " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                now - r->arrival())
                                                .count()) +
                             " ms in the queue"));
      }
      mu_.Lock();
      continue;
    }
    const int64_t room = dispatcher_->Room();
    const bool capacity = room > 0;
    if (capacity) {
      if (std::optional<Batch> batch =
              aggregator_.Poll(draining_ ? SteadyTime::max() : now, room)) {
        if (queue_observer_) queue_observer_(aggregator_.queued_rows());
        mu_.Unlock();
        {
          std::shared_lock<std::shared_mutex> dispatching(dispatch_mu_);
          dispatcher_->Dispatch(std::move(*batch));
        }
        mu_.Lock();
        if (aggregator_.queued_rows() == 0) drained_cv_.NotifyAll();
        continue;
      }
    }
    // Sleep until a request expires, or (with capacity) the front batch is due.
    std::optional<SteadyTime> wake = aggregator_.NextExpiry();
    if (capacity) {
      if (const auto due = aggregator_.NextDeadline(); due && (!wake || *due < *wake)) wake = due;
    }
    if (wake) {
      cv_.WaitUntil(&mu_, *wake);
    } else {
      cv_.Wait(&mu_);
    }
  }
}

}  // namespace packrat
