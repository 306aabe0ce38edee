#include "agent/pool/cgroup_info.h"

#include <gtest/gtest.h>

#include "tests/agent/pool/fake_host.h"

namespace packrat {
namespace {

using testing::FakeHost;

TEST(CgroupInfoTest, V1FindsTheCpusetAndItsCpus) {
  FakeHost host;
  host.CgroupV1("/kubepods/pod1/c1", "2-5", "0");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  EXPECT_EQ(info.version, CgroupVersion::kV1);
  EXPECT_EQ(info.cpuset_dir, host.V1Dir("/kubepods/pod1/c1"));
  ASSERT_TRUE(info.cpus);
  EXPECT_EQ(*info.cpus, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_FALSE(info.cpu_limit);
  EXPECT_EQ(info.ThreadBudget(4), 4);
}

TEST(CgroupInfoTest, V1QuotaCapsTheThreadBudget) {
  FakeHost host;
  host.CgroupV1("/", "0-7", "0");
  host.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  host.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  ASSERT_TRUE(info.cpu_limit);
  EXPECT_DOUBLE_EQ(*info.cpu_limit, 2.5);
  EXPECT_EQ(info.ThreadBudget(8), 2);
}

TEST(CgroupInfoTest, V1UnlimitedQuotaIsNoLimit) {
  FakeHost host;
  host.CgroupV1("/", "0-7", "0");
  host.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  host.Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_FALSE(ReadCgroupInfo(host.root()).cpu_limit);
}

TEST(CgroupInfoTest, V2ReadsEffectiveCpusAndCpuMax) {
  FakeHost host;
  host.CgroupV2("/kubepods.slice/pod.slice/cri-1.scope", "4-7");
  host.Write("/sys/fs/cgroup/kubepods.slice/pod.slice/cri-1.scope/cpu.max", "300000 100000\n");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  EXPECT_EQ(info.version, CgroupVersion::kV2);
  EXPECT_EQ(info.cpuset_dir, host.V2Dir("/kubepods.slice/pod.slice/cri-1.scope"));
  ASSERT_TRUE(info.cpus);
  EXPECT_EQ(*info.cpus, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_TRUE(info.cpu_limit);
  EXPECT_EQ(info.ThreadBudget(4), 3);
}

TEST(CgroupInfoTest, V2WithoutLimitAndMaxQuota) {
  FakeHost host;
  host.CgroupV2("/", "0-3");
  host.Write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  EXPECT_EQ(info.version, CgroupVersion::kV2);
  EXPECT_FALSE(info.cpu_limit);
}

TEST(CgroupInfoTest, V2WithoutTheCpusetControllerIsNone) {
  FakeHost host;
  host.CgroupV2("/a", "0-3");
  host.Write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory\n");
  EXPECT_EQ(ReadCgroupInfo(host.root()).version, CgroupVersion::kNone);
}

TEST(CgroupInfoTest, NothingMountedIsNone) {
  FakeHost host;
  host.Write("/proc/self/mountinfo", "");
  const CgroupInfo info = ReadCgroupInfo(host.root());
  EXPECT_EQ(info.version, CgroupVersion::kNone);
  EXPECT_FALSE(info.cpus);
}

TEST(CgroupInfoTest, ThisMachine) {
  // Whatever this host has, reading it must not fail and must name usable CPUs when it has a
  // cpuset hierarchy.
  const CgroupInfo info = ReadCgroupInfo("");
  if (info.version != CgroupVersion::kNone) {
    ASSERT_TRUE(info.cpus);
    EXPECT_FALSE(info.cpus->empty());
  }
}

}  // namespace
}  // namespace packrat
