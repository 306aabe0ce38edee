#include "tests/support/agent_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

namespace packrat::testing {

namespace {

// In a child: a mount namespace of its own with a `size` tmpfs on /dev/shm (unless empty) and
// each of `read_only` remounted read-only. False on failure. Runs between fork and exec.
bool MountPrivately(const std::string& size, const std::vector<std::string>& read_only) {
  if (unshare(CLONE_NEWNS) != 0) return false;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  for (const std::string& path : read_only) {
    if (mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      return false;
    }
  }
  if (size.empty()) return true;
  const std::string data = "size=" + size + ",mode=1777";
  return mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) == 0;
}

// The mount points of the cgroup file systems (v1 hierarchies and the v2 one).
std::vector<std::string> CgroupMounts() {
  std::vector<std::string> out;
  std::ifstream mounts("/proc/self/mounts");
  std::string device, path, type, rest;
  while (mounts >> device >> path >> type && std::getline(mounts, rest)) {
    if (type == "cgroup" || type == "cgroup2") out.push_back(path);
  }
  return out;
}

}  // namespace

bool CanMountPrivateDevShm() {
  const pid_t pid = fork();
  if (pid == 0) _exit(MountPrivately("1m", {}) ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

AgentProcess::AgentProcess(const std::string& agent_path, const std::string& config_yaml,
                           const AgentProcessOptions& options) {
  const std::string config = dir_.path() + "/config.yaml";
  std::ofstream(config) << config_yaml;
  const std::string port_file = dir_.path() + "/ports.json";

  const std::vector<std::string> read_only =
      options.read_only_cgroups ? CgroupMounts() : std::vector<std::string>{};
  const bool private_mounts = !options.private_dev_shm.empty() || options.read_only_cgroups;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) abort();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDERR_FILENO);
    if (private_mounts && !MountPrivately(options.private_dev_shm, read_only)) _exit(126);
    setenv("PACKRAT_LOG_LEVEL", "DEBUG", 1);
    execl(agent_path.c_str(), agent_path.c_str(), "--config", config.c_str(), "--port-file",
          port_file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread([this, fd = fds[0]] { ReadLoop(fd); });
}

AgentProcess::~AgentProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) reader_.join();
}

void AgentProcess::ReadLoop(int fd) {
  std::string partial;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    std::vector<std::string> complete;
    while ((nl = partial.find('\n')) != std::string::npos) {
      complete.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
    }
    if (!complete.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& l : complete) lines_.push_back(std::move(l));
      cv_.notify_all();
    }
  }
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

bool AgentProcess::WaitForLog(const std::string& needle, std::chrono::milliseconds timeout) {
  return WaitForLogCount(needle, 1, timeout);
}

bool AgentProcess::WaitForLogCount(const std::string& needle, size_t count,
                                   std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  size_t checked = 0;
  size_t found = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (; checked < lines_.size(); ++checked) {
      if (lines_[checked].find(needle) != std::string::npos && ++found >= count) return true;
    }
    if (eof_) return false;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) return false;
  }
}

bool AgentProcess::WaitUntilServing(std::chrono::milliseconds timeout) {
  if (!WaitForLog("models loaded", timeout)) return false;
  std::ifstream in(dir_.path() + "/ports.json");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  if (!std::regex_search(s, m,
                         std::regex(R"(\"http\":(\d+),\"management\":(\d+),\"metrics\":(\d+))"))) {
    return false;
  }
  http_port_ = static_cast<uint16_t>(std::stoi(m[1]));
  management_port_ = static_cast<uint16_t>(std::stoi(m[2]));
  metrics_port_ = static_cast<uint16_t>(std::stoi(m[3]));
  return true;
}

std::vector<pid_t> AgentProcess::RuntimePids() const {
  std::vector<pid_t> pids;
  std::lock_guard<std::mutex> lock(mu_);
  const std::regex re(R"(instance \S+ ready: pid (\d+))");
  for (const auto& line : lines_) {
    std::smatch m;
    if (std::regex_search(line, m, re)) pids.push_back(std::stoi(m[1]));
  }
  return pids;
}

std::optional<int> AgentProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (reaped_) return std::nullopt;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  kill(pid_, signal);
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    poll(&pfd, 1, static_cast<int>(timeout.count()));
    close(pidfd);
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  reaped_ = true;
  return status;
}

std::string AgentProcess::Log() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& l : lines_) out += l + "\n";
  return out;
}

std::string AgentProcess::Digest() const {
  constexpr size_t kStory = 60;
  constexpr size_t kTail = 15;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const std::string*> story;
  for (const auto& l : lines_) {
    if (l.rfind("D ", 0) != 0) story.push_back(&l);
  }
  std::string out = "\n--- agent log: " + std::to_string(lines_.size()) + " lines; the last " +
                    std::to_string(std::min(story.size(), kStory)) + " of its " +
                    std::to_string(story.size()) + " non-DEBUG lines:\n";
  for (size_t i = story.size() > kStory ? story.size() - kStory : 0; i < story.size(); ++i) {
    out += *story[i] + "\n";
  }
  out += "--- its last lines:\n";
  for (size_t i = lines_.size() > kTail ? lines_.size() - kTail : 0; i < lines_.size(); ++i) {
    out += lines_[i] + "\n";
  }
  return out + "--- end of agent log\n";
}

bool ProcessExists(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  // A zombie still answers kill(); look at its state.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  std::getline(stat, content);
  const size_t paren = content.rfind(')');
  return paren == std::string::npos || paren + 2 >= content.size() || content[paren + 2] != 'Z';
}

std::vector<std::string> SegmentsOf(pid_t agent_pid) {
  std::vector<std::string> names;
  const std::string prefix = "packrat." + std::to_string(agent_pid) + ".";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.push_back(e->d_name);
    }
    closedir(dir);
  }
  return names;
}

std::vector<pid_t> RuntimesOf(pid_t agent_pid) {
  std::vector<pid_t> pids;
  const std::string agent = std::to_string(agent_pid);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline");
    std::vector<std::string> args;
    for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--agent-pid" && args[i + 1] == agent && ProcessExists(pid)) {
        pids.push_back(pid);
        break;
      }
    }
  }
  closedir(proc);
  return pids;
}

int CgroupsOf(pid_t agent_pid) {
  int n = 0;
  const std::string prefix = "packrat." + std::to_string(agent_pid) + ".";
  if (DIR* dir = opendir("/sys/fs/cgroup/cpuset")) {
    while (dirent* e = readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) ++n;
    }
    closedir(dir);
  }
  return n;
}

}  // namespace packrat::testing
