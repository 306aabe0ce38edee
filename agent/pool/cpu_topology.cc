#include "agent/pool/cpu_topology.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/pool/cpu_list.h"

namespace packrat {
namespace {

bool ReadInt(const std::string& path, int* out) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *out);
}

}  // namespace

CpuTopology::CpuTopology(std::vector<CpuInfo> cpus) : cpus_(std::move(cpus)) {
  std::sort(cpus_.begin(), cpus_.end(),
            [](const CpuInfo& a, const CpuInfo& b) { return a.cpu < b.cpu; });
}

CpuTopology CpuTopology::Read(const std::string& root, const std::vector<int>& cpus) {
  std::map<int, int> node_of;
  const std::string node_dir = root + "/sys/devices/system/node";
  if (DIR* dir = opendir(node_dir.c_str())) {
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
      if (name.find_first_not_of("0123456789", 4) != std::string::npos) continue;
      const int node = std::stoi(name.substr(4));
      std::ifstream in(node_dir + "/" + name + "/cpulist");
      std::stringstream text;
      text << in.rdbuf();
      if (auto list = ParseCpuList(text.str()); list.ok()) {
        for (int c : *list) node_of[c] = node;
      }
    }
    closedir(dir);
  }
  std::vector<CpuInfo> out;
  for (int c : cpus) {
    CpuInfo info;
    info.cpu = c;
    const std::string topo =
        root + "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    if (!ReadInt(topo + "physical_package_id", &info.socket) || info.socket < 0) info.socket = 0;
    if (!ReadInt(topo + "core_id", &info.core)) info.core = c;
    if (auto it = node_of.find(c); it != node_of.end()) info.node = it->second;
    out.push_back(info);
  }
  return CpuTopology(std::move(out));
}

std::vector<int> CpuTopology::sockets() const {
  std::set<int> s;
  for (const CpuInfo& c : cpus_) s.insert(c.socket);
  return {s.begin(), s.end()};
}

const CpuInfo* CpuTopology::Find(int cpu) const {
  for (const CpuInfo& c : cpus_) {
    if (c.cpu == cpu) return &c;
  }
  return nullptr;
}

std::string CpuTopology::Describe() const {
  std::set<std::pair<int, int>> cores;
  for (const CpuInfo& c : cpus_) cores.insert({c.socket, c.core});
  return std::to_string(sockets().size()) + " socket(s), " + std::to_string(cores.size()) +
         " core(s), " + std::to_string(cpus_.size()) + " CPU(s) [" + FormatCpuList([&] {
           std::vector<int> ids;
           for (const CpuInfo& c : cpus_) ids.push_back(c.cpu);
           return ids;
         }()) +
         "]";
}

std::vector<int> AffinityCpus() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  return cores;
}

}  // namespace packrat
