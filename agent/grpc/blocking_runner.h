// BlockingRunner: a few threads of its own for calls that block for seconds (the model
// repository's Load and Unload), so that gRPC's reactor threads never wait on them (STYLE.md
// habit 7). Work runs in the order posted, on `threads` threads at once.
//
// Thread-safety: Post() and Stop() may be called from any thread. Stop() (and the destructor)
// lets every task already posted run to its end, then joins; work posted after Stop() is refused.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace packrat {

class BlockingRunner {
 public:
  // `max_queued`: tasks that may wait for a thread; beyond it Post() refuses.
  BlockingRunner(int threads, size_t max_queued);
  ~BlockingRunner();  // Stop()s

  BlockingRunner(const BlockingRunner&) = delete;
  BlockingRunner& operator=(const BlockingRunner&) = delete;

  // Queues `task`; false (and `task` is dropped, not run) when stopped or the queue is full.
  bool Post(std::function<void()> task) EXCLUDES(mu_);
  // Runs what was posted, then joins the threads. Blocks as long as the longest task. Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const size_t max_queued_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // written by the constructor and Stop() only
  std::once_flag joined_;
};

}  // namespace packrat
