// BlockingCalls: runs calls that may block for a long time (a model load: minutes) on threads of
// their own, so that the thread asking — an HTTP or gRPC I/O thread — never waits.
//
// Thread-safety: Run() may be called from any thread, also from inside a running call.
// Join() (and the destructor) waits for every call started, then refuses new ones (they run
// inline on the caller's thread instead, so none is lost).
#pragma once

#include <functional>
#include <list>
#include <thread>

#include "common/mutex.h"

namespace packrat {

class BlockingCalls {
 public:
  BlockingCalls() = default;
  ~BlockingCalls() { Join(); }
  BlockingCalls(const BlockingCalls&) = delete;
  BlockingCalls& operator=(const BlockingCalls&) = delete;

  void Run(std::function<void()> call) EXCLUDES(mu_);
  void Join() EXCLUDES(mu_);

 private:
  struct Call {
    std::thread thread;
    bool done = false;
  };

  Mutex mu_;
  std::list<Call> calls_ GUARDED_BY(mu_);  // finished ones are joined by the next Run()
  bool joined_ GUARDED_BY(mu_) = false;
};

}  // namespace packrat
