// Helpers for the shm tests that fork a peer process: reaping a child without hanging on one
// that is stuck, and waiting for a state that has no wake-up to wait on.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <thread>

namespace packrat::shm {

// Waits up to `timeout` for `pid` to exit and stores its wait status. A child still running
// then is killed and reported as a failure, so a hung peer fails the test instead of hanging it.
inline ::testing::AssertionResult ReapChild(
    pid_t pid, int* status, std::chrono::seconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return ::testing::AssertionSuccess();
    if (r < 0) return ::testing::AssertionFailure() << "waitpid failed";
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, status, 0);
      return ::testing::AssertionFailure() << "child " << pid << " hung and was killed";
    }
    std::this_thread::yield();
  }
}

// Yields until `done()` or `timeout`; for states that signal nothing (a peer announcing a futex
// sleep in a ring header). Returns done().
inline bool YieldUntil(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace packrat::shm
