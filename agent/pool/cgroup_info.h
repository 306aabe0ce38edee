// What the kernel's cgroups say about this process: which hierarchy holds the cpuset controller
// (v1 or v2), this process's cpuset directory, the CPUs it allows and the CPU quota.
//
// Read from /proc/self/mountinfo, /proc/self/cgroup and the cgroup files, every path under a
// `root` prefix ("" on a real host) so that tests describe fake hosts as directory trees.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace packrat {

enum class CgroupVersion { kNone, kV1, kV2 };

struct CgroupInfo {
  CgroupVersion version = CgroupVersion::kNone;  // of the hierarchy with the cpuset controller
  std::string cpuset_dir;  // this process's cpuset cgroup directory (with the root prefix)
  std::optional<std::vector<int>> cpus;  // its effective CPUs, if readable
  std::optional<double> cpu_limit;       // CPU quota / period, e.g. 2.5; nullopt = no quota

  // Cores a plan may use: floor of the quota (at least 1), or `usable` without a quota.
  int ThreadBudget(int usable) const;
};

// Never fails: what cannot be read is left unset (version kNone: no cpuset cgroup found).
CgroupInfo ReadCgroupInfo(const std::string& root);

// "cgroup v1", "cgroup v2" or "none".
const char* CgroupVersionName(CgroupVersion v);

}  // namespace packrat
