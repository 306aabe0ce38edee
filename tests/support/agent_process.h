// Runs a real packrat-agent for integration tests: writes its config, starts the process with
// stderr on a pipe and PACKRAT_LOG_LEVEL=DEBUG, and lets tests wait for log lines (no sleeps: a
// reader thread signals each new line).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"

namespace packrat::testing {

struct AgentProcessOptions {
  // Non-empty: the agent (and so its runtimes) runs in a mount namespace of its own with a
  // tmpfs of this size ("4m") on /dev/shm, as in a container with a small /dev/shm. Needs
  // CAP_SYS_ADMIN (CanMountPrivateDevShm); the agent exits 126 where the mount fails.
  std::string private_dev_shm;
  // True: the same mount namespace, with every cgroup file system read-only, as for a
  // container that may not write the host's cgroups. Needs CAP_SYS_ADMIN too.
  bool read_only_cgroups = false;
};

class AgentProcess {
 public:
  // Writes `config_yaml` to a fresh temporary directory and starts `agent_path` on it.
  AgentProcess(const std::string& agent_path, const std::string& config_yaml,
               const AgentProcessOptions& options = {});
  ~AgentProcess();  // SIGKILLs the agent if still running

  pid_t pid() const { return pid_; }
  // Blocks until a log line containing `needle` appeared (true) or `timeout` (false).
  bool WaitForLog(const std::string& needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Blocks until `count` log lines contain `needle`.
  bool WaitForLogCount(const std::string& needle, size_t count,
                       std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Waits for start-up ("models loaded") and reads the port file.
  bool WaitUntilServing(std::chrono::milliseconds timeout = std::chrono::seconds(180));
  uint16_t http_port() const { return http_port_; }
  uint16_t management_port() const { return management_port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  // Runtime process ids, from the "instance ... ready: pid N" log lines.
  std::vector<pid_t> RuntimePids() const;

  // Sends `signal` and waits for the agent to exit; its exit status as from waitpid, or nullopt
  // on timeout.
  std::optional<int> Stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  std::string Log() const;
  // For failure messages: the line count, the last 60 lines that are not DEBUG (the agent's
  // story: plans, reconfigurations, warnings) and the last 15 lines of all. A test's whole
  // DEBUG log (a line per request) can run to megabytes, which buries the failure itself.
  std::string Digest() const;
  const std::string& dir() const { return dir_.path(); }

 private:
  void ReadLoop(int fd);

  TempDir dir_{"packrat-test"};  // config, port file; removed after the agent is reaped
  pid_t pid_ = -1;
  bool reaped_ = false;
  uint16_t http_port_ = 0;
  uint16_t management_port_ = 0;
  uint16_t metrics_port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;  // guarded by mu_
  bool eof_ = false;                // guarded by mu_
  std::thread reader_;
};

// Whether AgentProcessOptions::private_dev_shm and read_only_cgroups can work here (tries a
// private mount namespace in a child).
bool CanMountPrivateDevShm();

// True if a process with this pid exists (not counting zombies of other parents).
bool ProcessExists(pid_t pid);
// Names in /dev/shm that start with "packrat.<pid>.".
std::vector<std::string> SegmentsOf(pid_t agent_pid);
// The runtimes agent `agent_pid` started that are still running (their --agent-pid).
std::vector<pid_t> RuntimesOf(pid_t agent_pid);
// Cgroups under the v1 cpuset hierarchy whose names start with "packrat.<pid>.".
int CgroupsOf(pid_t agent_pid);

}  // namespace packrat::testing
