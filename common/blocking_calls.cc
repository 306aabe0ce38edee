#include "common/blocking_calls.h"

namespace packrat {

void BlockingCalls::Run(std::function<void()> call) {
  std::list<Call> finished;  // joined outside the lock
  {
    MutexLock lock(&mu_);
    if (!joined_) {
      for (auto it = calls_.begin(); it != calls_.end();) {
        const auto next = std::next(it);
        if (it->done) finished.splice(finished.end(), calls_, it);
        it = next;
      }
      Call& c = calls_.emplace_back();
      c.thread = std::thread([this, &c, call = std::move(call)] {
        call();
        MutexLock lock(&mu_);
        c.done = true;
      });
      call = nullptr;
    }
  }
  for (Call& c : finished) c.thread.join();
  if (call) call();  // after Join(): on this thread
}

void BlockingCalls::Join() {
  std::list<Call> all;
  {
    MutexLock lock(&mu_);
    joined_ = true;
    all.swap(calls_);
  }
  for (Call& c : all) {
    if (c.thread.joinable()) c.thread.join();
  }
}

}  // namespace packrat
