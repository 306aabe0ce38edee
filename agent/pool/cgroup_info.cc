#include "agent/pool/cgroup_info.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "agent/pool/cpu_list.h"

namespace packrat {
namespace {

struct Mount {
  std::string root;         // the hierarchy path mounted (4th field)
  std::string mount_point;  // 5th field
  std::string fstype;
  std::vector<std::string> super_options;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  for (const auto& s : v) {
    if (s == x) return true;
  }
  return false;
}

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<Mount> ReadMounts(const std::string& root) {
  std::vector<Mount> mounts;
  std::ifstream in(root + "/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::vector<std::string> f;
    std::string x;
    while (fields >> x) f.push_back(x);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 3 > f.size()) continue;
    Mount m{f[3], f[4], f[dash + 1], Split(f[dash + 3], ',')};
    if (m.fstype == "cgroup" || m.fstype == "cgroup2") mounts.push_back(std::move(m));
  }
  return mounts;
}

// Controllers -> this process's path, from /proc/self/cgroup ("3:cpuset:/a/b", "0::/a").
std::vector<std::pair<std::vector<std::string>, std::string>> ReadSelfCgroups(
    const std::string& root) {
  std::vector<std::pair<std::vector<std::string>, std::string>> out;
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    out.emplace_back(Split(line.substr(a + 1, b - a - 1), ','), line.substr(b + 1));
  }
  return out;
}

// Where `path` (in the hierarchy) is in the file system, given the hierarchy's mount.
std::string DirFor(const std::string& root, const Mount& m, std::string path) {
  if (m.root != "/" && path.rfind(m.root, 0) == 0) path = path.substr(m.root.size());
  if (path == "/") path.clear();
  return root + m.mount_point + path;
}

std::optional<std::string> SelfPath(
    const std::vector<std::pair<std::vector<std::string>, std::string>>& self,
    const std::string& controller) {
  for (const auto& [controllers, path] : self) {
    if (controller.empty() ? controllers.empty() || controllers == std::vector<std::string>{""}
                           : Contains(controllers, controller)) {
      return path;
    }
  }
  return std::nullopt;
}

}  // namespace

int CgroupInfo::ThreadBudget(int usable) const {
  if (!cpu_limit) return usable;
  return std::max(1, std::min(usable, static_cast<int>(std::floor(*cpu_limit + 1e-9))));
}

const char* CgroupVersionName(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV1:
      return "cgroup v1";
    case CgroupVersion::kV2:
      return "cgroup v2";
    case CgroupVersion::kNone:
      break;
  }
  return "none";
}

CgroupInfo ReadCgroupInfo(const std::string& root) {
  CgroupInfo info;
  const std::vector<Mount> mounts = ReadMounts(root);
  const auto self = ReadSelfCgroups(root);
  const Mount* v2 = nullptr;
  for (const Mount& m : mounts) {
    if (m.fstype == "cgroup2") v2 = &m;
  }
  const std::optional<std::string> v2_path = SelfPath(self, "");

  // cpuset: a v1 hierarchy with the controller, else the unified one if it offers cpuset.
  for (const Mount& m : mounts) {
    if (m.fstype != "cgroup" || !Contains(m.super_options, "cpuset")) continue;
    if (auto path = SelfPath(self, "cpuset")) {
      info.version = CgroupVersion::kV1;
      info.cpuset_dir = DirFor(root, m, *path);
      auto text = ReadText(info.cpuset_dir + "/cpuset.effective_cpus");
      if (!text) text = ReadText(info.cpuset_dir + "/cpuset.cpus");
      if (text) {
        if (auto cpus = ParseCpuList(*text); cpus.ok()) info.cpus = *cpus;
      }
    }
    break;
  }
  if (info.version == CgroupVersion::kNone && v2 != nullptr && v2_path) {
    const std::string dir = DirFor(root, *v2, *v2_path);
    const auto controllers = ReadText(root + v2->mount_point + "/cgroup.controllers");
    std::vector<std::string> names;
    if (controllers) {
      std::stringstream in(*controllers);
      std::string c;
      while (in >> c) names.push_back(c);
    }
    if (Contains(names, "cpuset")) {
      info.version = CgroupVersion::kV2;
      info.cpuset_dir = dir;
      if (auto text = ReadText(dir + "/cpuset.cpus.effective")) {
        if (auto cpus = ParseCpuList(*text); cpus.ok() && !cpus->empty()) info.cpus = *cpus;
      }
    }
  }

  // CPU quota: the v1 cpu controller, else cpu.max in the unified hierarchy.
  for (const Mount& m : mounts) {
    if (m.fstype != "cgroup" || !Contains(m.super_options, "cpu")) continue;
    if (auto path = SelfPath(self, "cpu")) {
      const std::string dir = DirFor(root, m, *path);
      const auto quota = ReadText(dir + "/cpu.cfs_quota_us");
      const auto period = ReadText(dir + "/cpu.cfs_period_us");
      if (quota && period) {
        const double q = std::atof(quota->c_str());
        const double p = std::atof(period->c_str());
        if (q > 0 && p > 0) info.cpu_limit = q / p;
      }
      return info;
    }
  }
  if (v2 != nullptr && v2_path) {
    if (const auto max = ReadText(DirFor(root, *v2, *v2_path) + "/cpu.max")) {
      std::stringstream in(*max);
      std::string quota;
      double period = 0;
      if (in >> quota >> period && quota != "max" && period > 0) {
        const double q = std::atof(quota.c_str());
        if (q > 0) info.cpu_limit = q / period;
      }
    }
  }
  return info;
}

}  // namespace packrat
