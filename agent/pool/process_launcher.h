// Starting and stopping runtime processes: the seam that lets pool tests run without forking.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace packrat {

struct LaunchSpec {
  std::string path;               // executable
  std::vector<std::string> args;  // argv[1..]
  std::vector<int> cores;         // CPU affinity applied before exec; empty = inherit
  // A cgroup's cgroup.procs: the child joins that cgroup before exec. Empty = stay in the
  // agent's cgroup. Failing to join fails the launch.
  std::string cgroup_procs;
  // The child starts at idle priority (SCHED_IDLE) before exec, so that its exec and dynamic
  // loading too run only where its CPUs are otherwise idle. Ask only where a child may come
  // back (MayLeaveIdlePriority, common/idle_priority.h): StartRuntimeProcess and the runtime
  // move it back.
  bool idle_priority = false;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;

  // Starts a child process. It receives SIGKILL if the agent dies (PR_SET_PDEATHSIG).
  virtual StatusOr<pid_t> Launch(const LaunchSpec& spec) = 0;
  // Sends `signal` to a child started by Launch.
  virtual void Signal(pid_t pid, int signal) = 0;
  // Reaps the child if it has exited: its exit description ("exit 0", "signal 9"), or nullopt
  // while it runs. Never blocks.
  virtual std::optional<std::string> Poll(pid_t pid) = 0;
  // Blocks until the child exits or `timeout` passes; the exit description or nullopt.
  virtual std::optional<std::string> Wait(pid_t pid, std::chrono::milliseconds timeout) = 0;
};

// fork + exec. Forks happen on one dedicated thread that lives as long as this object, because
// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process.
// Thread-safe.
class ForkExecLauncher : public ProcessLauncher {
 public:
  ForkExecLauncher();
  ~ForkExecLauncher() override;

  StatusOr<pid_t> Launch(const LaunchSpec& spec) override;
  void Signal(pid_t pid, int signal) override;
  std::optional<std::string> Poll(pid_t pid) override;
  std::optional<std::string> Wait(pid_t pid, std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat
