#include "tests/agent/metrics/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/agent/metrics/poll_until.h"

extern char** environ;

namespace packrat::metrics::testing {

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  std::string* error,
                                                  const std::string& stdin_path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(
      &actions, 0, stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    *error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return nullptr;
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, fds[0]));
}

ChildProcess::ChildProcess(pid_t pid, int output_fd) : pid_(pid) {
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  reader_ = std::thread([this, output_fd] { ReadLoop(output_fd); });
}

ChildProcess::~ChildProcess() {
  Stop(SIGKILL);
  if (reader_.joinable()) reader_.join();
  if (pidfd_ >= 0) close(pidfd_);
}

void ChildProcess::ReadLoop(int fd) {
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(mu_);
    partial_.append(buf, static_cast<size_t>(n));
    size_t eol;
    while ((eol = partial_.find('\n')) != std::string::npos) {
      lines_.push_back(partial_.substr(0, eol));
      partial_.erase(0, eol + 1);
    }
    cv_.notify_all();
  }
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (!partial_.empty()) lines_.push_back(std::move(partial_));
  partial_.clear();
  eof_ = true;
  cv_.notify_all();
}

std::optional<std::string> ChildProcess::WaitForLine(
    const std::function<bool(std::string_view)>& match, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  size_t checked = 0;
  while (true) {
    for (; checked < lines_.size(); ++checked) {
      if (match(lines_[checked])) return lines_[checked];
    }
    if (eof_) return std::nullopt;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && checked == lines_.size()) {
      return std::nullopt;
    }
  }
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  WaitForExit(timeout);
  if (exit_status_) {
    // The pipe closes when the child exits (unless it left children holding it).
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [this] { return eof_; });
  }
  return exit_status_;
}

std::optional<int> ChildProcess::WaitForExit(std::chrono::milliseconds timeout) {
  if (exit_status_) return exit_status_;
  const auto try_reap = [this] {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) exit_status_ = status;
    return exit_status_.has_value();
  };
  if (pidfd_ >= 0) {
    // The pidfd becomes readable when the child exits.
    pollfd pfd{pidfd_, POLLIN, 0};
    int r;
    do {
      r = poll(&pfd, 1, static_cast<int>(timeout.count()));
    } while (r < 0 && errno == EINTR);
    try_reap();
    return exit_status_;
  }
  PollUntil(try_reap, timeout, std::chrono::milliseconds(20));
  return exit_status_;
}

std::optional<int> ChildProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (exit_status_) return exit_status_;
  kill(pid_, signal);
  if (WaitForExit(timeout)) return exit_status_;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_status_ = status;
  return std::nullopt;
}

std::string ChildProcess::Output() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const std::string& line : lines_) out.append(line).push_back('\n');
  out.append(partial_);
  return out;
}

}  // namespace packrat::metrics::testing
