// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with the clang
// thread-safety annotations of common/thread_annotations.h, so that GUARDED_BY and REQUIRES are
// checked (leveldb's port::Mutex / MutexLock, Abseil's absl::Mutex).
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Add() EXCLUDES(mu_) { MutexLock lock(&mu_); ++count_; }
//
// A CondVar waits with the Mutex held (REQUIRES): it releases the lock while it sleeps and
// holds it again when it returns, exactly as std::condition_variable does with a unique_lock.
// Spurious wake-ups happen: wait in a loop on the condition, written in the caller, where the
// analysis sees the lock held (a predicate lambda would be analysed as a function without it):
//
//   while (!done_) cv_.Wait(&mu_);
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace packrat {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the lock (where it cannot see the acquisition).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  // Sleeps until notified (or woken spuriously).
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller's lock again
  }
  // Sleeps until notified or `deadline`; false if the deadline passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
 private:
  std::condition_variable cv_;
};

}  // namespace packrat
