#include "agent/pool/cpuset_controller.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/pool/process_launcher.h"
#include "tests/agent/pool/fake_host.h"

namespace packrat {
namespace {

using testing::FakeHost;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// A pid that is certainly dead: a child we started and reaped.
pid_t DeadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST(CpusetControllerTest, V1GroupsGetCpusAndMemsAndAreRemoved) {
  FakeHost host;
  host.CgroupV1("/pod", "0-3", "0");
  const pid_t self = getpid();
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), self);
  ASSERT_TRUE(c->enabled()) << c->describe();
  const std::string dir = host.V1Dir("/pod") + "/packrat." + std::to_string(self) + ".m.1.0";
  {
    auto group = c->Create("m.1.0", {2, 3}, {0});
    ASSERT_TRUE(group.ok()) << group.status().message();
    EXPECT_EQ((*group)->dir(), dir);
    EXPECT_EQ((*group)->procs_file(), dir + "/cgroup.procs");
    EXPECT_EQ(Read(dir + "/cpuset.cpus"), "2-3");
    EXPECT_EQ(Read(dir + "/cpuset.mems"), "0");
    EXPECT_EQ(c->List(), std::vector<std::string>{dir});
  }
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(c->List().empty());
}

TEST(CpusetControllerTest, V1EmptyMemsCopiesTheParents) {
  FakeHost host;
  host.CgroupV1("/", "0-3", "0-1");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), getpid());
  auto group = c->Create("x", {1}, {});
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(Read((*group)->dir() + "/cpuset.mems"), "0-1");
}

TEST(CpusetControllerTest, NamesAreMadeFileNameSafe) {
  FakeHost host;
  host.CgroupV1("/", "0-3", "0");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), getpid());
  auto group = c->Create("a/b c", {1}, {0});
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(std::filesystem::path((*group)->dir()).filename().string(),
            "packrat." + std::to_string(getpid()) + ".a_b_c");
}

TEST(CpusetControllerTest, StaleGroupsOfDeadAgentsAreRemovedAtOpen) {
  FakeHost host;
  host.CgroupV1("/", "0-3", "0");
  const std::string base = host.V1Dir("/");
  const pid_t dead = DeadPid();
  const std::string stale = base + "/packrat." + std::to_string(dead) + ".m.1.0";
  const std::string mine_before = base + "/packrat." + std::to_string(getpid()) + ".m.1.0";
  const std::string live = base + "/packrat.1.m.1.0";  // pid 1 runs
  const std::string other = base + "/system.slice";
  for (const auto& d : {stale, mine_before, live, other})
    host.Write(d.substr(host.root().size()) + "/cpuset.cpus", "0");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), getpid());
  EXPECT_FALSE(Exists(stale));
  EXPECT_FALSE(Exists(mine_before)) << "an earlier agent with our pid (a restarted container)";
  EXPECT_TRUE(Exists(live));
  EXPECT_TRUE(Exists(other));
}

// A private cgroup namespace over the host's hierarchy: /proc/self/cgroup says "0::/", which
// maps to the hierarchy's root, whose cgroup.procs does not list the agent. Groups there would
// land at the host's root: affinity only, saying why.
TEST(CpusetControllerTest, AHierarchyThatIsNotTheAgentsOwnCgroupIsNotUsed) {
  FakeHost host;
  host.CgroupV2("/", "0-3");
  const std::string dir = host.V2Dir("/");
  host.Write(dir.substr(host.root().size()) + "/cgroup.procs", "1\n17\n");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), 4242);
  EXPECT_FALSE(c->enabled());
  EXPECT_NE(c->describe().find("pid 4242 is not in " + dir + "/cgroup.procs"), std::string::npos)
      << c->describe();
  EXPECT_FALSE(std::filesystem::exists(dir + "/packrat.4242.agent"));
  // Listed: its own cgroup, used.
  host.Write(dir.substr(host.root().size()) + "/cgroup.procs", "1\n4242\n");
  EXPECT_TRUE(CpusetController::Open(ReadCgroupInfo(host.root()), 4242)->enabled());
}

TEST(CpusetControllerTest, V2MovesTheAgentToALeafAndEnablesCpuset) {
  FakeHost host;
  host.CgroupV2("/system.slice/packrat.service", "0-3");
  const std::string dir = host.V2Dir("/system.slice/packrat.service");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), 4242);
  ASSERT_TRUE(c->enabled()) << c->describe();
  EXPECT_EQ(Read(dir + "/packrat.4242.agent/cgroup.procs"), "4242");
  EXPECT_EQ(Read(dir + "/cgroup.subtree_control"), "+cpuset");
  auto group = c->Create("m.1.0", {1}, {});
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(Read((*group)->dir() + "/cpuset.cpus"), "1");
  EXPECT_EQ(Read((*group)->dir() + "/cpuset.mems"), "0");
  EXPECT_EQ(c->List().size(), 1u) << "the agent's own leaf is not a runtime group";
}

TEST(CpusetControllerTest, UnwritableHierarchyFallsBackToAffinity) {
  // A read-only /sys/fs/cgroup (an unprivileged container) fails the probe group like this
  // vanished directory does, also for root.
  FakeHost host;
  host.CgroupV1("/pod", "0-3", "0");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  std::filesystem::remove_all(host.V1Dir("/pod"));
  auto c = CpusetController::Open(info, getpid());
  EXPECT_FALSE(c->enabled());
  EXPECT_NE(c->describe().find("sched_setaffinity only (cgroup v1 at "), std::string::npos)
      << c->describe();
  EXPECT_NE(c->describe().find("is not writable: mkdir"), std::string::npos) << c->describe();
}

TEST(CpusetControllerTest, NoHierarchyFallsBackToAffinity) {
  FakeHost host;
  host.Write("/proc/self/mountinfo", "");
  auto c = CpusetController::Open(ReadCgroupInfo(host.root()), getpid());
  EXPECT_FALSE(c->enabled());
  auto group = c->Create("x", {0}, {});
  ASSERT_TRUE(group.ok());
  EXPECT_TRUE((*group)->procs_file().empty());
}

// The real cgroup hierarchy of this machine: a real runtime-like process is launched into a
// group with one CPU, the kernel confirms both, and the group is gone after the process is.
TEST(CpusetControllerTest, RealHierarchyConfinesALaunchedProcess) {
  const CgroupInfo info = ReadCgroupInfo("");
  auto c = CpusetController::Open(info, getpid());
  if (!c->enabled()) GTEST_SKIP() << "no writable cpuset hierarchy here: " << c->describe();
  // A mounted v1 hierarchy is libcgroup's to manage.
  if (info.version == CgroupVersion::kV1) {
    EXPECT_NE(c->describe().find("via libcgroup"), std::string::npos) << c->describe();
  }
  ASSERT_TRUE(info.cpus && !info.cpus->empty());
  const int cpu = info.cpus->back();
  std::string dir;
  {
    auto group = c->Create("real-test", {cpu}, {});
    ASSERT_TRUE(group.ok()) << group.status().message();
    dir = (*group)->dir();
    ForkExecLauncher launcher;
    LaunchSpec spec;
    spec.path = "/bin/sleep";
    spec.args = {"60"};
    spec.cgroup_procs = (*group)->procs_file();
    auto pid = launcher.Launch(spec);
    ASSERT_TRUE(pid.ok()) << pid.status().message();
    const std::string cgroup = Read("/proc/" + std::to_string(*pid) + "/cgroup");
    const std::string relative = dir.substr(info.cpuset_dir.size());
    EXPECT_NE(cgroup.find(relative), std::string::npos) << cgroup;
    const std::string status = Read("/proc/" + std::to_string(*pid) + "/status");
    EXPECT_NE(status.find("Cpus_allowed_list:\t" + std::to_string(cpu) + "\n"), std::string::npos)
        << status;
    EXPECT_EQ(Read(dir + "/cgroup.procs"), std::to_string(*pid) + "\n");
    launcher.Signal(*pid, SIGKILL);
    ASSERT_TRUE(launcher.Wait(*pid, std::chrono::seconds(10)));
  }
  EXPECT_FALSE(Exists(dir));
}

// A stale group on the real hierarchy with a live process inside: the next agent (RemoveStale,
// through libcgroup on v1) kills the process and removes the group.
TEST(CpusetControllerTest, RealStaleGroupIsEmptiedAndRemoved) {
  const CgroupInfo info = ReadCgroupInfo("");
  if (info.version == CgroupVersion::kNone) GTEST_SKIP() << "no cpuset hierarchy here";
  // What an agent that died without cleaning up leaves: its runtime still running in its group.
  const std::string dir = info.cpuset_dir + "/packrat." + std::to_string(DeadPid()) + ".orphan";
  ForkExecLauncher launcher;
  LaunchSpec spec;
  spec.path = "/bin/sleep";
  spec.args = {"60"};
  spec.cgroup_procs = dir + "/cgroup.procs";
  // Any agent starting meanwhile (tests run in parallel) removes the stale group too, maybe
  // between its creation and the launch into it: then make it again.
  StatusOr<pid_t> pid = Unavailable("not launched");
  for (int attempt = 0; attempt < 5 && !pid.ok(); ++attempt) {
    const Status made = CgroupBackend::Direct()->CreateCpuset(
        dir, ReadCgroupFile(info.cpuset_dir + "/cpuset.cpus"),
        ReadCgroupFile(info.cpuset_dir + (info.version == CgroupVersion::kV2
                                              ? "/cpuset.mems.effective"
                                              : "/cpuset.mems")));
    if (!made.ok() && !Exists(dir)) {
      GTEST_SKIP() << "cpuset hierarchy not writable: " << made.message();
    }
    pid = launcher.Launch(spec);
  }
  ASSERT_TRUE(pid.ok()) << pid.status().message();

  auto new_agent = CpusetController::Open(info, getpid());
  // Open() already removed it; the runtime inside was killed on the way.
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(launcher.Wait(*pid, std::chrono::seconds(10)));
}

// cgroup v2 on this kernel, in a private mount namespace: the agent makes its leaf and enables
// +cpuset where the v2 hierarchy has the controller; where it does not (cpuset bound to v1, as
// on hosts mixing both), it falls back to affinity with the kernel's reason.
TEST(CpusetControllerTest, RealCgroupV2EitherConfinesOrExplainsWhyNot) {
  char base[] = "/tmp/packrat-cg2.XXXXXX";
  ASSERT_NE(mkdtemp(base), nullptr);
  const std::string mount_dir = base;
  const std::string report = mount_dir + ".report";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        mount("cgroup2", mount_dir.c_str(), "cgroup2", 0, nullptr) != 0) {
      _exit(77);
    }
    const std::string dir = mount_dir + "/packrat-v2-test";
    mkdir(dir.c_str(), 0755);
    std::ofstream out(report);
    out << "controllers=" << Read(mount_dir + "/cgroup.controllers");
    CgroupInfo info;
    info.version = CgroupVersion::kV2;
    info.cpuset_dir = dir;
    info.cpus = std::vector<int>{0};
    {
      auto c = CpusetController::Open(info, getpid());
      out << "enabled=" << c->enabled() << "\n"
          << "describe=" << c->describe() << "\n";
      if (c->enabled()) {
        auto group = c->Create("v2-test", {0}, {});
        out << "group="
            << (group.ok() ? Read((*group)->dir() + "/cpuset.cpus") : group.status().message())
            << "\n";
      }
    }
    out.close();
    // Leave the test leaf for the parent cgroup, then remove what the test made.
    std::ofstream(mount_dir + "/cgroup.procs") << getpid();
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.is_directory()) rmdir(e.path().c_str());
    }
    rmdir(dir.c_str());
    umount(mount_dir.c_str());
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  rmdir(mount_dir.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount cgroup2 here";
  const std::string text = Read(report);
  std::filesystem::remove(report);
  const bool has_cpuset = text.find("controllers=") != std::string::npos &&
                          text.substr(0, text.find('\n')).find("cpuset") != std::string::npos;
  if (has_cpuset) {
    EXPECT_NE(text.find("enabled=1"), std::string::npos) << text;
    EXPECT_NE(text.find("group=0\n"), std::string::npos) << text;
  } else {
    EXPECT_NE(text.find("enabled=0"), std::string::npos) << text;
    EXPECT_NE(text.find("describe=sched_setaffinity only (cgroup v2 at "), std::string::npos)
        << text;
    EXPECT_NE(text.find("cgroup.subtree_control"), std::string::npos) << text;
  }
}

TEST(CpusetControllerTest, LaunchFailsClearlyWhenTheCgroupCannotBeJoined) {
  ForkExecLauncher launcher;
  LaunchSpec spec;
  spec.path = "/bin/true";
  spec.cgroup_procs = "/nonexistent/cgroup.procs";
  auto pid = launcher.Launch(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("cannot join cgroup '/nonexistent/cgroup.procs'"),
            std::string::npos)
      << pid.status().message();
}

}  // namespace
}  // namespace packrat
