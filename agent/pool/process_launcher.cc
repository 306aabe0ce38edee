#include "agent/pool/process_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <thread>

#include "common/idle_priority.h"
#include "common/mutex.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)  // linux/close_range.h, Linux 5.11
#endif

namespace packrat {
namespace {

std::string Describe(int wstatus) {
  if (WIFEXITED(wstatus)) return "exit " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return "signal " + std::to_string(WTERMSIG(wstatus));
  return "status " + std::to_string(wstatus);
}

StatusOr<pid_t> ForkExec(const LaunchSpec& spec) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> storage;
  storage.push_back(spec.path);
  storage.insert(storage.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : spec.cores) CPU_SET(c, &set);
  const pid_t parent = getpid();

  const char* cgroup_procs = spec.cgroup_procs.empty() ? nullptr : spec.cgroup_procs.c_str();
  const long max_fd = sysconf(_SC_OPEN_MAX);

  // Reports a failure before exec back to the parent as {step, errno}; closed on exec.
  enum Step : int { kJoinCgroup = 1, kExec = 2 };
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return Internal(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    close(pipefd[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    auto fail = [&](int step) {
      const int report[2] = {step, errno};
      [[maybe_unused]] ssize_t n = write(pipefd[1], report, sizeof(report));
      _exit(127);
    };
    if (cgroup_procs != nullptr) {
      const int fd = open(cgroup_procs, O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) fail(kJoinCgroup);
      close(fd);
    }
    if (!spec.cores.empty()) sched_setaffinity(0, sizeof(set), &set);
    if (spec.idle_priority) SetIdlePriority(0);  // best effort: the runtime checks its policy
    // Nothing of the agent's but stdin, stdout and stderr crosses exec: a runtime holding a
    // copy of an accepted socket keeps it open after the agent closed it, and the client's
    // next request on it is never read (issue 53: blocks of requests waited for a switch to
    // stop that runtime).
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (long fd = 3; fd < max_fd; ++fd) fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
    }
    execv(argv[0], argv.data());
    fail(kExec);
  }
  close(pipefd[1]);
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = read(pipefd[0], report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  close(pipefd[0]);
  if (n == sizeof(report)) {
    waitpid(pid, nullptr, 0);
    if (report[0] == kJoinCgroup) {
      return Internal("cannot join cgroup '" + spec.cgroup_procs + "': " + strerror(report[1]));
    }
    return Internal("cannot execute '" + spec.path + "': " + strerror(report[1]));
  }
  return pid;
}

}  // namespace

struct ForkExecLauncher::Impl {
  Mutex mu;
  CondVar cv;
  std::deque<std::function<void()>> tasks GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
  std::thread thread;

  void Loop() {
    MutexLock lock(&mu);
    while (true) {
      while (!stop && tasks.empty()) cv.Wait(&mu);
      if (tasks.empty()) return;
      auto task = std::move(tasks.front());
      tasks.pop_front();
      mu.Unlock();
      task();
      mu.Lock();
    }
  }
};

ForkExecLauncher::ForkExecLauncher() : impl_(std::make_unique<Impl>()) {
  impl_->thread = std::thread([this] { impl_->Loop(); });
}

ForkExecLauncher::~ForkExecLauncher() {
  {
    MutexLock lock(&impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.NotifyAll();
  impl_->thread.join();
}

StatusOr<pid_t> ForkExecLauncher::Launch(const LaunchSpec& spec) {
  std::packaged_task<StatusOr<pid_t>()> task([&spec] { return ForkExec(spec); });
  auto result = task.get_future();
  {
    MutexLock lock(&impl_->mu);
    if (impl_->stop) return Unavailable("launcher stopped");
    impl_->tasks.emplace_back([&task] { task(); });
  }
  impl_->cv.NotifyAll();
  return result.get();
}

void ForkExecLauncher::Signal(pid_t pid, int signal) {
  if (pid > 0) kill(pid, signal);
}

std::optional<std::string> ForkExecLauncher::Poll(pid_t pid) {
  int wstatus = 0;
  const pid_t r = waitpid(pid, &wstatus, WNOHANG);
  if (r == pid) return Describe(wstatus);
  if (r < 0) return std::string("gone");  // already reaped or not our child
  return std::nullopt;
}

std::optional<std::string> ForkExecLauncher::Wait(pid_t pid, std::chrono::milliseconds timeout) {
  if (auto done = Poll(pid)) return done;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    int rc;
    do {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      rc = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    } while (rc < 0 && errno == EINTR);
    close(pidfd);
    return Poll(pid);
  }
  // No pidfd (kernels before 5.3, or a seccomp profile that forbids it): poll waitpid with a
  // backoff of 1 to 20 ms, which bounds both the lag and the wake-ups of a long wait.
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    if (auto done = Poll(pid)) return done;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace packrat
