// Revision: a counter of the changes of something others watch (a served model's instance
// sets and autoscaling decisions), with one listener told of every change — so that a watcher
// (the management API's long poll, GET .../config?wait_after=N) wakes on events instead of
// polling.
//
// Thread-safety: all methods may be called from any thread. The listener is set before the
// first Bump and runs on the bumping thread, after the count changed; it must not block.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace packrat {

class Revision {
 public:
  explicit Revision(std::function<void()> listener = nullptr) : listener_(std::move(listener)) {}

  // Counts one change and tells the listener. Returns the new revision.
  uint64_t Bump() {
    const uint64_t now = value_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (listener_) listener_();
    return now;
  }
  uint64_t current() const { return value_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> value_{0};
  const std::function<void()> listener_;
};

}  // namespace packrat
