// Puts each runtime in a cpuset cgroup of its own: exactly its cores and its socket's memory
// nodes. Groups live in the agent's own cpuset cgroup and are named
// "packrat.<agent pid>.<name>", so a later agent can tell which are stale.
//
//   cgroup v1: <dir>/packrat.<pid>.<name>/{cpuset.cpus,cpuset.mems,cgroup.procs}
//   cgroup v2: the agent first moves itself into the leaf <dir>/packrat.<pid>.agent (v2 forbids
//              processes in a cgroup whose children have controllers) and enables +cpuset in
//              <dir>/cgroup.subtree_control; then the same layout as v1.
//
// Groups are made, attached to and removed through a CgroupBackend (cgroup_backend.h):
// libcgroup where it manages the hierarchy (a cgroup v1 cpuset mount it finds in /proc/mounts),
// direct file writes elsewhere (cgroup v2, whose cpuset controller libcgroup 2.0.2 handles only
// partly, and the tests' fake hosts). describe() names the backend.
//
// Where no hierarchy is writable (an unprivileged container), Open() returns a controller that
// only pins with sched_setaffinity (the launcher does that in any case): enabled() is false,
// groups are placeholders, and the reason is in describe().
//
// The runtime joins its group itself: between fork and exec the child writes "0" into
// CpusetGroup::procs_file(), so it never runs a single instruction outside it.
//
// Thread-safety: Create() and the groups' destructors may run on any thread concurrently.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/pool/cgroup_backend.h"
#include "agent/pool/cgroup_info.h"
#include "common/status.h"

namespace packrat {

// One runtime's cgroup. Destroying it removes the directory; the process in it must have been
// reaped first (a failure is logged and left to the next start's RemoveStale()).
class CpusetGroup {
 public:
  // A placeholder (affinity-only pinning): no directory, nothing to remove.
  CpusetGroup() = default;
  CpusetGroup(std::string dir, std::shared_ptr<CgroupBackend> backend)
      : dir_(std::move(dir)), backend_(std::move(backend)) {}
  ~CpusetGroup();
  CpusetGroup(const CpusetGroup&) = delete;
  CpusetGroup& operator=(const CpusetGroup&) = delete;

  // The directory (empty for affinity-only placeholders).
  const std::string& dir() const { return dir_; }
  // Where the runtime writes "0" to join; empty when there is no cgroup.
  std::string procs_file() const { return backend_ ? dir_ + "/cgroup.procs" : std::string(); }

 private:
  const std::string dir_;
  const std::shared_ptr<CgroupBackend> backend_;  // null for placeholders
};

class CpusetController {
 public:
  // Tries the hierarchy `info` names, for agent `self`: picks the backend (libcgroup where it
  // manages `info.cpuset_dir`, else direct writes), removes stale groups (RemoveStale), sets v2
  // up, and creates and removes a probe group. Falls back to affinity-only pinning on any
  // failure; never fails itself.
  static std::unique_ptr<CpusetController> Open(const CgroupInfo& info, pid_t self);
  // As Open(), with the backend chosen by the caller (tests).
  static std::unique_ptr<CpusetController> Open(const CgroupInfo& info, pid_t self,
                                                std::shared_ptr<CgroupBackend> backend);
  // Affinity-only, for tests and `--no-cgroups`.
  static std::unique_ptr<CpusetController> AffinityOnly(std::string why);

  bool enabled() const { return enabled_; }
  // "cgroup v1 at /sys/fs/cgroup/cpuset via libcgroup" or "sched_setaffinity only (<why>)".
  const std::string& describe() const { return describe_; }

  // A group with exactly `cpus` and memory nodes `mems` (the parent's when empty). `name` is
  // made file-name safe. Errors carry the path and errno text.
  StatusOr<std::unique_ptr<CpusetGroup>> Create(const std::string& name,
                                                const std::vector<int>& cpus,
                                                const std::vector<int>& mems);

  // Removes groups left by agents that no longer run (and by an earlier agent with this pid,
  // e.g. PID 1 in a restarted container), killing any process still inside first. Returns the
  // removed directories.
  std::vector<std::string> RemoveStale();
  // The group directories this agent owns now (tests, leak checks).
  std::vector<std::string> List() const;

 private:
  CpusetController(CgroupVersion version, std::string dir, pid_t self, std::string describe,
                   std::shared_ptr<CgroupBackend> backend)
      : version_(version),
        dir_(std::move(dir)),
        self_(self),
        describe_(std::move(describe)),
        backend_(std::move(backend)) {
    enabled_ = version_ != CgroupVersion::kNone;
  }
  Status SetUpV2();
  std::string Prefix(pid_t pid) const { return "packrat." + std::to_string(pid) + "."; }

  const CgroupVersion version_;
  const std::string dir_;
  const pid_t self_;
  std::string describe_;
  const std::shared_ptr<CgroupBackend> backend_;  // null when affinity-only
  bool enabled_ = false;
};

}  // namespace packrat
