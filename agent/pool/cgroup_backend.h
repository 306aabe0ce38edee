// CgroupBackend: how CpusetController touches the cgroup hierarchy — the seam between the
// runtimes' cpuset groups and the files that make them.
//
//   Libcgroup()  production: libcgroup (Debian's libcgroup-dev) creates, configures, attaches
//                to and removes groups, in hierarchies it finds mounted (cgroup_init reads
//                /proc/mounts);
//   Direct()     plain file operations (mkdir, write, rmdir) on whatever directory it is given:
//                the tests' fake hosts (directory trees libcgroup cannot be pointed at), and
//                hierarchies libcgroup does not manage.
//
// Two operations stay direct writes in both, for reasons libcgroup cannot help with
// (docs/architecture.md, "cpuset cgroups"): a runtime joins its group between fork and exec by
// writing "0" into its cgroup.procs (only async-signal-safe calls are allowed there; libcgroup
// allocates and opens files), and on cgroup v2 the agent enables +cpuset in its cgroup's
// cgroup.subtree_control (libcgroup 2.0.2 has no public call for it).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace packrat {

class CgroupBackend {
 public:
  virtual ~CgroupBackend() = default;

  // "libcgroup" or "direct file writes".
  virtual std::string Describe() const = 0;
  // Creates group `dir` (absolute) with cpuset.cpus = `cpus` and cpuset.mems = `mems` (lists
  // as "0-3,8"). Errors carry the path and the reason.
  virtual Status CreateCpuset(const std::string& dir, const std::string& cpus,
                              const std::string& mems) = 0;
  // Creates group `dir` with no settings (cgroup v2: the agent's own leaf).
  virtual Status CreateGroup(const std::string& dir) = 0;
  // Moves process `pid` into group `dir`.
  virtual Status Attach(const std::string& dir, pid_t pid) = 0;
  // Removes group `dir`, killing (SIGKILL) whatever still runs inside first; OK if it is gone.
  virtual Status Remove(const std::string& dir) = 0;
  // The content of `file` of group `dir` without trailing whitespace; "" if unreadable.
  virtual std::string Read(const std::string& dir, const std::string& file) = 0;

  static std::shared_ptr<CgroupBackend> Direct();
  // libcgroup, for groups under `dir`; FailedPrecondition with libcgroup's reason where it does
  // not manage the cpuset hierarchy that holds `dir`.
  static StatusOr<std::shared_ptr<CgroupBackend>> Libcgroup(const std::string& dir);
};

// Shared by both backends: plain file writes, for what libcgroup cannot do (header comment).
Status WriteCgroupFile(const std::string& path, const std::string& text);
std::string ReadCgroupFile(const std::string& path);

}  // namespace packrat
