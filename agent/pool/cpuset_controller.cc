#include "agent/pool/cpuset_controller.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/pool/cpu_list.h"
#include "common/logging.h"

namespace packrat {
namespace {

Status WriteFile(const std::string& path, const std::string& text) {
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string SafeName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

std::vector<std::string> Children(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0 && e->d_type == DT_DIR) out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

// rmdir, killing whatever still runs inside first (a stale group's orphaned runtime).
bool RemoveGroup(const std::string& dir) {
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
  if (errno == ENOTEMPTY) {  // a plain directory standing in for cgroupfs (tests)
    for (const char* f : {"/cpuset.cpus", "/cpuset.mems", "/cgroup.procs"}) {
      unlink((dir + f).c_str());
    }
    if (rmdir(dir.c_str()) == 0) return true;
  }
  if (errno != EBUSY) return false;
  std::stringstream procs(ReadFile(dir + "/cgroup.procs"));
  pid_t pid;
  while (procs >> pid) kill(pid, SIGKILL);
  // A killed process leaves its cgroup only once the kernel has torn it down (milliseconds).
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

CpusetGroup::~CpusetGroup() {
  if (!real_) return;
  if (!RemoveGroup(dir_)) {
    PACKRAT_LOG(WARNING) << "cannot remove cgroup " << dir_ << ": " << strerror(errno)
                         << " (the next start removes it)";
  }
}

std::unique_ptr<CpusetController> CpusetController::AffinityOnly(std::string why) {
  return std::unique_ptr<CpusetController>(new CpusetController(
      CgroupVersion::kNone, "", getpid(), "sched_setaffinity only (" + why + ")"));
}

std::unique_ptr<CpusetController> CpusetController::Open(const CgroupInfo& info, pid_t self) {
  if (info.version == CgroupVersion::kNone) {
    return AffinityOnly("no cpuset cgroup hierarchy found");
  }
  std::unique_ptr<CpusetController> c(new CpusetController(
      info.version, info.cpuset_dir, self,
      std::string(CgroupVersionName(info.version)) + " at " + info.cpuset_dir));
  for (const std::string& dir : c->RemoveStale()) {
    PACKRAT_LOG(INFO) << "removed stale cgroup " << dir;
  }
  Status ok = c->version_ == CgroupVersion::kV2 ? c->SetUpV2() : Status::Ok();
  if (ok.ok()) {
    std::vector<int> cpus;
    if (info.cpus && !info.cpus->empty()) cpus = {info.cpus->front()};
    auto probe = c->Create("probe", cpus, {});
    if (!probe.ok()) ok = probe.status();
  }
  if (!ok.ok()) return AffinityOnly(c->describe_ + " is not writable: " + ok.message());
  return c;
}

Status CpusetController::SetUpV2() {
  // Leave the cgroup whose children will get controllers (v2's "no internal processes" rule).
  const std::string leaf = dir_ + "/" + Prefix(self_) + "agent";
  if (mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal("mkdir " + leaf + ": " + strerror(errno));
  }
  RETURN_IF_ERROR(WriteFile(leaf + "/cgroup.procs", std::to_string(self_)));
  const std::string subtree = ReadFile(dir_ + "/cgroup.subtree_control");
  if (subtree.find("cpuset") == std::string::npos) {
    RETURN_IF_ERROR(WriteFile(dir_ + "/cgroup.subtree_control", "+cpuset"));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CpusetGroup>> CpusetController::Create(const std::string& name,
                                                                const std::vector<int>& cpus,
                                                                const std::vector<int>& mems) {
  if (!enabled_) return std::make_unique<CpusetGroup>("", false);
  const std::string dir = dir_ + "/" + Prefix(self_) + SafeName(name);
  if (mkdir(dir.c_str(), 0755) != 0) {
    return Internal("mkdir " + dir + ": " + strerror(errno));
  }
  auto group = std::make_unique<CpusetGroup>(dir, true);  // removes the directory on failure
  std::string cpu_text = FormatCpuList(cpus);
  if (cpu_text.empty()) cpu_text = ReadFile(dir_ + "/cpuset.cpus");
  std::string mem_text = FormatCpuList(mems);
  if (mem_text.empty()) {
    mem_text = ReadFile(
        dir_ + (version_ == CgroupVersion::kV2 ? "/cpuset.mems.effective" : "/cpuset.mems"));
  }
  RETURN_IF_ERROR(WriteFile(dir + "/cpuset.cpus", cpu_text));
  if (!mem_text.empty()) RETURN_IF_ERROR(WriteFile(dir + "/cpuset.mems", mem_text));
  return group;
}

std::vector<std::string> CpusetController::RemoveStale() {
  std::vector<std::string> removed;
  if (dir_.empty()) return removed;
  for (const std::string& name : Children(dir_, "packrat.")) {
    const size_t dot = name.find('.', 8);
    if (dot == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + 8, &end, 10);
    if (end != name.c_str() + dot || pid <= 0) continue;
    const bool alive = pid != self_ && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (alive) continue;
    if (name == Prefix(self_) + "agent") continue;  // our own v2 leaf
    if (RemoveGroup(dir_ + "/" + name)) removed.push_back(dir_ + "/" + name);
  }
  return removed;
}

std::vector<std::string> CpusetController::List() const {
  std::vector<std::string> out;
  if (!enabled_) return out;
  for (const std::string& name : Children(dir_, Prefix(self_))) {
    if (name != Prefix(self_) + "agent") out.push_back(dir_ + "/" + name);
  }
  return out;
}

}  // namespace packrat
