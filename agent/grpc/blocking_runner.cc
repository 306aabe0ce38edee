#include "agent/grpc/blocking_runner.h"

#include <utility>

namespace packrat {

BlockingRunner::BlockingRunner(int threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

BlockingRunner::~BlockingRunner() { Stop(); }

bool BlockingRunner::Post(std::function<void()> task) {
  MutexLock lock(&mu_);
  if (stop_ || queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(task));
  cv_.NotifyOne();
  return true;
}

void BlockingRunner::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  std::call_once(joined_, [this] {
    for (std::thread& t : threads_) t.join();
  });
}

void BlockingRunner::Loop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stop_) cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace packrat
