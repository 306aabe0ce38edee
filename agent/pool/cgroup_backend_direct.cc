// CgroupBackend::Direct(): the cgroup files written by hand (cgroup_backend.h).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/pool/cgroup_backend.h"

namespace packrat {

Status WriteCgroupFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open " + path + ": " + strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Internal("write '" + text + "' to " + path + ": " + strerror(err));
  }
  return Status::Ok();
}

std::string ReadCgroupFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace {

class DirectBackend final : public CgroupBackend {
 public:
  std::string Describe() const override { return "direct file writes"; }

  Status CreateCpuset(const std::string& dir, const std::string& cpus,
                      const std::string& mems) override {
    if (mkdir(dir.c_str(), 0755) != 0) return Internal("mkdir " + dir + ": " + strerror(errno));
    Status s = WriteCgroupFile(dir + "/cpuset.cpus", cpus);
    if (s.ok() && !mems.empty()) s = WriteCgroupFile(dir + "/cpuset.mems", mems);
    if (!s.ok()) (void)Remove(dir);
    return s;
  }

  Status CreateGroup(const std::string& dir) override {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Internal("mkdir " + dir + ": " + strerror(errno));
    }
    return Status::Ok();
  }

  Status Attach(const std::string& dir, pid_t pid) override {
    return WriteCgroupFile(dir + "/cgroup.procs", std::to_string(pid));
  }

  Status Remove(const std::string& dir) override {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return Status::Ok();
    if (errno == ENOTEMPTY) {  // a plain directory standing in for cgroupfs (tests)
      for (const char* f : {"/cpuset.cpus", "/cpuset.mems", "/cgroup.procs"}) {
        unlink((dir + f).c_str());
      }
      if (rmdir(dir.c_str()) == 0) return Status::Ok();
    }
    if (errno != EBUSY) return Internal("rmdir " + dir + ": " + strerror(errno));
    std::stringstream procs(ReadCgroupFile(dir + "/cgroup.procs"));
    pid_t pid;
    while (procs >> pid) kill(pid, SIGKILL);
    // A killed process leaves its cgroup only once the kernel has torn it down (milliseconds).
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Internal("rmdir " + dir + ": " + strerror(errno));
  }

  std::string Read(const std::string& dir, const std::string& file) override {
    return ReadCgroupFile(dir + "/" + file);
  }
};

}  // namespace

std::shared_ptr<CgroupBackend> CgroupBackend::Direct() {
  static const std::shared_ptr<CgroupBackend> backend = std::make_shared<DirectBackend>();
  return backend;
}

}  // namespace packrat
