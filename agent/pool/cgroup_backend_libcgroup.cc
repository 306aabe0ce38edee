// CgroupBackend::Libcgroup(): the runtimes' cpuset groups through libcgroup (cgroup_backend.h).
#include <libcgroup.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "agent/pool/cgroup_backend.h"
#include "common/mutex.h"

namespace packrat {
namespace {

std::string Reason(int code) {
  std::string why = cgroup_strerror(code);
  if (code == ECGOTHER) why += std::string(" (") + strerror(cgroup_get_last_errno()) + ")";
  return why;
}

// cgroup_init() once per process; its result every time after.
int InitOnce() {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] { result = cgroup_init(); });
  return result;
}

// An owned `struct cgroup`.
struct CgroupDeleter {
  void operator()(struct cgroup* cg) const { cgroup_free(&cg); }
};
using CgroupPtr = std::unique_ptr<struct cgroup, CgroupDeleter>;

class LibcgroupBackend final : public CgroupBackend {
 public:
  explicit LibcgroupBackend(std::string mount) : mount_(std::move(mount)) {}

  std::string Describe() const override { return "libcgroup"; }

  Status CreateCpuset(const std::string& dir, const std::string& cpus,
                      const std::string& mems) override {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CgroupPtr cg, New(dir));
    struct cgroup_controller* cpuset = cgroup_add_controller(cg.get(), "cpuset");
    if (cpuset == nullptr) return Internal("libcgroup: cannot add cpuset to " + dir);
    if (int rc = cgroup_add_value_string(cpuset, "cpuset.cpus", cpus.c_str()); rc != 0) {
      return Internal("libcgroup: cpuset.cpus of " + dir + ": " + Reason(rc));
    }
    if (!mems.empty()) {
      if (int rc = cgroup_add_value_string(cpuset, "cpuset.mems", mems.c_str()); rc != 0) {
        return Internal("libcgroup: cpuset.mems of " + dir + ": " + Reason(rc));
      }
    }
    if (int rc = cgroup_create_cgroup(cg.get(), /*ignore_ownership=*/1); rc != 0) {
      Status error = Internal("libcgroup: create " + dir + ": " + Reason(rc));
      (void)cgroup_delete_cgroup(cg.get(), /*ignore_migration=*/1);  // a half-made group
      return error;
    }
    return Status::Ok();
  }

  Status CreateGroup(const std::string& dir) override {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CgroupPtr cg, New(dir));
    if (cgroup_add_controller(cg.get(), "cpuset") == nullptr) {
      return Internal("libcgroup: cannot add cpuset to " + dir);
    }
    if (int rc = cgroup_create_cgroup(cg.get(), /*ignore_ownership=*/1); rc != 0) {
      return Internal("libcgroup: create " + dir + ": " + Reason(rc));
    }
    return Status::Ok();
  }

  Status Attach(const std::string& dir, pid_t pid) override {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CgroupPtr cg, New(dir));
    if (cgroup_add_controller(cg.get(), "cpuset") == nullptr) {
      return Internal("libcgroup: cannot add cpuset to " + dir);
    }
    if (int rc = cgroup_attach_task_pid(cg.get(), pid); rc != 0) {
      return Internal("libcgroup: attach " + std::to_string(pid) + " to " + dir + ": " +
                      Reason(rc));
    }
    return Status::Ok();
  }

  Status Remove(const std::string& dir) override {
    {
      MutexLock lock(&mu_);
      ASSIGN_OR_RETURN(std::string name, Relative(dir));
      // Whatever still runs inside (a stale group's orphaned runtime) is killed first.
      pid_t* pids = nullptr;
      int count = 0;
      if (cgroup_get_procs(name.data(), const_cast<char*>("cpuset"), &pids, &count) == 0) {
        for (int i = 0; i < count; ++i) kill(pids[i], SIGKILL);
        free(pids);
      }
    }
    // A killed process leaves its cgroup only once the kernel has torn it down (milliseconds).
    int rc = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
      {
        MutexLock lock(&mu_);
        ASSIGN_OR_RETURN(CgroupPtr cg, New(dir));
        if (cgroup_add_controller(cg.get(), "cpuset") == nullptr) {
          return Internal("libcgroup: cannot add cpuset to " + dir);
        }
        rc = cgroup_delete_cgroup_ext(cg.get(), CGFLAG_DELETE_IGNORE_MIGRATION);
        if (rc == 0 || rc == ECGROUPNOTEXIST) return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Internal("libcgroup: delete " + dir + ": " + Reason(rc));
  }

  std::string Read(const std::string& dir, const std::string& file) override {
    MutexLock lock(&mu_);
    StatusOr<CgroupPtr> cg = New(dir);
    if (!cg.ok() || cgroup_get_cgroup(cg->get()) != 0) return ReadCgroupFile(dir + "/" + file);
    struct cgroup_controller* cpuset = cgroup_get_controller(cg->get(), "cpuset");
    char* value = nullptr;
    if (cpuset == nullptr || cgroup_get_value_string(cpuset, file.c_str(), &value) != 0) {
      return ReadCgroupFile(dir + "/" + file);  // a file libcgroup does not list (v2 effective)
    }
    std::string out = value;
    free(value);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

 private:
  // `dir` relative to the cpuset mount point, as libcgroup names groups.
  StatusOr<std::string> Relative(const std::string& dir) const {
    if (dir.compare(0, mount_.size(), mount_) != 0) {
      return FailedPrecondition(dir + " is not under the cpuset mount " + mount_);
    }
    std::string name = dir.substr(mount_.size());
    while (!name.empty() && name.front() == '/') name.erase(name.begin());
    return name.empty() ? std::string(".") : name;
  }
  StatusOr<CgroupPtr> New(const std::string& dir) REQUIRES(mu_) {
    ASSIGN_OR_RETURN(std::string name, Relative(dir));
    CgroupPtr cg(cgroup_new_cgroup(name.c_str()));
    if (!cg) return Internal("libcgroup: cgroup_new_cgroup(" + name + ") failed");
    return cg;
  }

  const std::string mount_;
  Mutex mu_;  // libcgroup's calls, one at a time
};

}  // namespace

StatusOr<std::shared_ptr<CgroupBackend>> CgroupBackend::Libcgroup(const std::string& dir) {
  if (int rc = InitOnce(); rc != 0) {
    return FailedPrecondition("libcgroup: cgroup_init: " + Reason(rc));
  }
  char* mount = nullptr;
  if (int rc = cgroup_get_subsys_mount_point("cpuset", &mount); rc != 0 || mount == nullptr) {
    return FailedPrecondition("libcgroup finds no cpuset hierarchy: " + Reason(rc));
  }
  std::string mount_point = mount;
  free(mount);
  if (dir.compare(0, mount_point.size(), mount_point) != 0 ||
      (dir.size() > mount_point.size() && dir[mount_point.size()] != '/')) {
    return FailedPrecondition(dir + " is not under the cpuset hierarchy libcgroup knows (" +
                              mount_point + ")");
  }
  return std::shared_ptr<CgroupBackend>(std::make_shared<LibcgroupBackend>(mount_point));
}

}  // namespace packrat
