// Which sockets, physical cores and NUMA nodes the usable CPUs belong to, read from sysfs.
//
// Every path is read under a `root` prefix ("" on a real host), so tests describe fake machines
// (two sockets, SMT siblings, a restricted cpuset) as directory trees.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace packrat {

struct CpuInfo {
  int cpu = 0;     // logical CPU number
  int socket = 0;  // physical_package_id
  int core = 0;    // core_id: SMT siblings share it (within a socket)
  int node = 0;    // NUMA node (memory node for cpuset.mems)
};

class CpuTopology {
 public:
  CpuTopology() = default;
  // Topology of exactly `cpus` (ascending order kept).
  explicit CpuTopology(std::vector<CpuInfo> cpus);

  // Reads /sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id} and
  // /sys/devices/system/node/nodeK/cpulist under `root` for each of `cpus`. Missing files (some
  // VMs and containers) read as socket 0, node 0, and a core of its own.
  static CpuTopology Read(const std::string& root, const std::vector<int>& cpus);

  const std::vector<CpuInfo>& cpus() const { return cpus_; }
  // Distinct sockets, ascending.
  std::vector<int> sockets() const;
  // The CPU's entry; nullptr if it is not in this topology.
  const CpuInfo* Find(int cpu) const;
  // "2 socket(s), 8 core(s), 16 CPU(s)" for logs.
  std::string Describe() const;

 private:
  std::vector<CpuInfo> cpus_;
};

// The CPUs this process may run on (its affinity mask), ascending.
std::vector<int> AffinityCpus();

}  // namespace packrat
