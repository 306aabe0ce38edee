// Runs an external program (promtool, prometheus) for a test: its stdout and stderr go to one
// pipe that a reader thread splits into lines, so tests can block until a line appears (no
// sleeps), and stopping it is bounded: a child that ignores SIGTERM is SIGKILLed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace packrat::metrics::testing {

class ChildProcess {
 public:
  // Starts argv[0] (looked up in PATH) with `argv`, stdin from `stdin_path` (default
  // /dev/null). Returns nullptr and sets `error` if it could not be started (e.g. not installed).
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             std::string* error,
                                             const std::string& stdin_path = "");
  ~ChildProcess();  // Stop()s with SIGKILL if still running

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Blocks until an output line satisfies `match` (returns that line), or until `timeout` or the
  // end of the output (returns nullopt).
  std::optional<std::string> WaitForLine(const std::function<bool(std::string_view)>& match,
                                         std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the child to exit and for the end of its output (so Output() is
  // complete); its wait status, or nullopt if still running.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Sends `signal` and waits up to `timeout`; a child still running then is SIGKILLed and
  // reaped. Returns the wait status, or nullopt if it had to be killed. Idempotent.
  std::optional<int> Stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Everything it printed so far.
  std::string Output() const;

 private:
  ChildProcess(pid_t pid, int output_fd);
  void ReadLoop(int fd);
  // Wait() without waiting for the output to end.
  std::optional<int> WaitForExit(std::chrono::milliseconds timeout);

  pid_t pid_;
  int pidfd_ = -1;                  // for waiting with a timeout; -1 if the kernel lacks pidfd
  std::optional<int> exit_status_;  // set once reaped (only the test thread reaps)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;  // GUARDED_BY(mu_)
  std::string partial_;             // GUARDED_BY(mu_); an unterminated last line
  bool eof_ = false;                // GUARDED_BY(mu_)
  std::thread reader_;
};

}  // namespace packrat::metrics::testing
