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

}  // namespace

CpusetGroup::~CpusetGroup() {
  if (!backend_) return;
  if (Status s = backend_->Remove(dir_); !s.ok()) {
    PACKRAT_LOG(WARNING) << "cannot remove cgroup " << dir_ << ": " << s.message()
                         << " (the next start removes it)";
  }
}

std::unique_ptr<CpusetController> CpusetController::AffinityOnly(std::string why) {
  return std::unique_ptr<CpusetController>(new CpusetController(
      CgroupVersion::kNone, "", getpid(), "sched_setaffinity only (" + why + ")", nullptr));
}

namespace {

// Whether `dir`/cgroup.procs lists `self`; true where it lists nobody or cannot be read (a
// test's fake host: the process's own cgroup lists it at least).
bool ListsSelf(const std::string& dir, pid_t self) {
  std::ifstream in(dir + "/cgroup.procs");
  bool any = false;
  for (pid_t pid; in >> pid; any = true) {
    if (pid == self) return true;
  }
  return !any;
}

}  // namespace

std::unique_ptr<CpusetController> CpusetController::Open(const CgroupInfo& info, pid_t self) {
  std::shared_ptr<CgroupBackend> backend = CgroupBackend::Direct();
  if (info.version == CgroupVersion::kV1) {
    // libcgroup manages v1 hierarchies it finds mounted; anything else (a test's fake host, a
    // directory libcgroup does not see) is written directly.
    StatusOr<std::shared_ptr<CgroupBackend>> lib = CgroupBackend::Libcgroup(info.cpuset_dir);
    if (lib.ok()) {
      backend = *std::move(lib);
    } else {
      PACKRAT_LOG(INFO) << "cgroups without libcgroup: " << lib.status().message();
    }
  }
  return Open(info, self, std::move(backend));
}

std::unique_ptr<CpusetController> CpusetController::Open(const CgroupInfo& info, pid_t self,
                                                         std::shared_ptr<CgroupBackend> backend) {
  if (info.version == CgroupVersion::kNone) {
    return AffinityOnly("no cpuset cgroup hierarchy found");
  }
  // The directory must be this process's own cgroup. In a private cgroup namespace (containerd
  // and CRI-O with cgroup v2) /proc/self/cgroup says "0::/", which over a hierarchy mounted from
  // outside the namespace (a host's /sys/fs/cgroup) maps to that hierarchy's root: groups made
  // there would land at the host's root, outside this container.
  if (!ListsSelf(info.cpuset_dir, self)) {
    return AffinityOnly("pid " + std::to_string(self) + " is not in " + info.cpuset_dir +
                        "/cgroup.procs: a cgroup namespace over a hierarchy mounted from "
                        "outside it, where groups would land outside this container");
  }
  std::unique_ptr<CpusetController> c(
      new CpusetController(info.version, info.cpuset_dir, self,
                           std::string(CgroupVersionName(info.version)) + " at " + info.cpuset_dir +
                               " via " + backend->Describe(),
                           backend));
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
  RETURN_IF_ERROR(backend_->CreateGroup(leaf));
  RETURN_IF_ERROR(backend_->Attach(leaf, self_));
  // libcgroup 2.0.2 has no public call for subtree_control (cgroup_backend.h).
  const std::string subtree = ReadCgroupFile(dir_ + "/cgroup.subtree_control");
  if (subtree.find("cpuset") == std::string::npos) {
    RETURN_IF_ERROR(WriteCgroupFile(dir_ + "/cgroup.subtree_control", "+cpuset"));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CpusetGroup>> CpusetController::Create(const std::string& name,
                                                                const std::vector<int>& cpus,
                                                                const std::vector<int>& mems) {
  if (!enabled_) return std::make_unique<CpusetGroup>();
  const std::string dir = dir_ + "/" + Prefix(self_) + SafeName(name);
  std::string cpu_text = FormatCpuList(cpus);
  if (cpu_text.empty()) cpu_text = backend_->Read(dir_, "cpuset.cpus");
  std::string mem_text = FormatCpuList(mems);
  if (mem_text.empty()) {
    mem_text = backend_->Read(
        dir_, version_ == CgroupVersion::kV2 ? "cpuset.mems.effective" : "cpuset.mems");
  }
  RETURN_IF_ERROR(backend_->CreateCpuset(dir, cpu_text, mem_text));
  return std::make_unique<CpusetGroup>(dir, backend_);
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
    if (backend_->Remove(dir_ + "/" + name).ok()) removed.push_back(dir_ + "/" + name);
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
