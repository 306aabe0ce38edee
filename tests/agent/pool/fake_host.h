// A fake host as a directory tree: /proc/self/{mountinfo,cgroup}, cgroup files and sysfs CPU
// topology, written under a TempDir that the code under test reads as its `root`.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace packrat::testing {

class FakeHost {
 public:
  const std::string& root() const { return dir_.path(); }

  // Writes `text` to root + `path`, creating the folders.
  void Write(const std::string& path, const std::string& text) const {
    const std::filesystem::path p = root() + path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  // CPU `cpu` on `socket`, physical core `core`; NUMA node lists are written by AddNode.
  void AddCpu(int cpu, int socket, int core) const {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    Write(dir + "physical_package_id", std::to_string(socket) + "\n");
    Write(dir + "core_id", std::to_string(core) + "\n");
  }
  void AddNode(int node, const std::string& cpulist) const {
    Write("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist", cpulist + "\n");
  }

  // A cgroup v1 host with cpuset and cpu controllers, this process in `path`.
  void CgroupV1(const std::string& path, const std::string& cpus, const std::string& mems) const {
    Write("/proc/self/mountinfo",
          "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
          "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
          "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
    Write("/proc/self/cgroup", "4:cpu,cpuacct:" + path + "\n3:cpuset:" + path + "\n0::/\n");
    const std::string dir = "/sys/fs/cgroup/cpuset" + (path == "/" ? "" : path);
    Write(dir + "/cpuset.cpus", cpus + "\n");
    Write(dir + "/cpuset.effective_cpus", cpus + "\n");
    Write(dir + "/cpuset.mems", mems + "\n");
    Write(dir + "/cgroup.procs", "");
    Write("/sys/fs/cgroup/unified/cgroup.controllers", "");
  }
  std::string V1Dir(const std::string& path) const {
    return root() + "/sys/fs/cgroup/cpuset" + (path == "/" ? "" : path);
  }

  // A cgroup v2 (unified) host with cpuset and cpu enabled, this process in `path`.
  void CgroupV2(const std::string& path, const std::string& cpus) const {
    Write("/proc/self/mountinfo",
          "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 "
          "rw,nsdelegate,memory_recursiveprot\n");
    Write("/proc/self/cgroup", "0::" + path + "\n");
    Write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
    const std::string dir = "/sys/fs/cgroup" + (path == "/" ? "" : path);
    Write(dir + "/cpuset.cpus.effective", cpus + "\n");
    Write(dir + "/cpuset.mems.effective", "0\n");
    Write(dir + "/cgroup.subtree_control", "\n");
    Write(dir + "/cgroup.procs", "");
  }
  std::string V2Dir(const std::string& path) const {
    return root() + "/sys/fs/cgroup" + (path == "/" ? "" : path);
  }

 private:
  TempDir dir_{"packrat-host"};
};

}  // namespace packrat::testing
