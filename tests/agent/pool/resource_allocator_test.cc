#include "agent/pool/resource_allocator.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/agent/pool/fake_host.h"

namespace packrat {
namespace {

using testing::FakeHost;

// 2 sockets × 4 cores × 2 SMT threads, Linux numbering: CPUs 0-7 are the first threads
// (socket 0: 0-3, socket 1: 4-7), 8-15 their siblings. One NUMA node per socket.
CpuTopology TwoSocketsSmt(const FakeHost& host, const std::vector<int>& usable) {
  for (int c = 0; c < 16; ++c) host.AddCpu(c, (c % 8) / 4, c % 4);
  host.AddNode(0, "0-3,8-11");
  host.AddNode(1, "4-7,12-15");
  return CpuTopology::Read(host.root(), usable);
}

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int c = lo; c <= hi; ++c) v.push_back(c);
  return v;
}

int SocketOf(const CpuTopology& topo, int cpu) { return topo.Find(cpu)->socket; }

TEST(CpuTopologyTest, ReadsSocketsCoresAndNodes) {
  FakeHost host;
  const CpuTopology topo = TwoSocketsSmt(host, Range(0, 15));
  EXPECT_EQ(topo.sockets(), (std::vector<int>{0, 1}));
  EXPECT_EQ(topo.Find(9)->socket, 0);
  EXPECT_EQ(topo.Find(9)->core, 1);
  EXPECT_EQ(topo.Find(13)->node, 1);
  EXPECT_EQ(topo.Describe(), "2 socket(s), 8 core(s), 16 CPU(s) [0-15]");
}

TEST(CpuTopologyTest, MissingSysfsReadsAsOneSocket) {
  FakeHost host;
  const CpuTopology topo = CpuTopology::Read(host.root(), {0, 1, 2});
  EXPECT_EQ(topo.sockets(), (std::vector<int>{0}));
  EXPECT_EQ(topo.Describe(), "1 socket(s), 3 core(s), 3 CPU(s) [0-2]");
}

TEST(ResourceAllocatorTest, InstancesAreSocketLocalAndRoundRobin) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 15)), 16);
  auto placed = alloc.Place({2, 2, 2, 2}, {});
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  std::set<int> all;
  std::vector<int> sockets;
  for (const Placement& p : *placed) {
    ASSERT_EQ(p.cpus.size(), 2u);
    EXPECT_EQ(SocketOf(alloc.topology(), p.cpus[0]), SocketOf(alloc.topology(), p.cpus[1]));
    EXPECT_EQ(p.mems, std::vector<int>{SocketOf(alloc.topology(), p.cpus[0])});
    sockets.push_back(SocketOf(alloc.topology(), p.cpus[0]));
    all.insert(p.cpus.begin(), p.cpus.end());
  }
  EXPECT_EQ(all.size(), 8u) << "no CPU is given twice";
  EXPECT_EQ(sockets, (std::vector<int>{0, 1, 0, 1}));
  // Physical cores before SMT siblings: 8 threads fit on the 8 first threads.
  EXPECT_EQ(all, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(ResourceAllocatorTest, SiblingsOnlyWhenPhysicalCoresRunOut) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 15)), 16);
  auto placed = alloc.Place({6}, {});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ((*placed)[0].cpus, (std::vector<int>{0, 1, 2, 3, 8, 9}));
  EXPECT_EQ((*placed)[0].mems, std::vector<int>{0});
}

TEST(ResourceAllocatorTest, AnInstanceLargerThanASocketSpansSockets) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 15)), 16);
  auto placed = alloc.Place({12}, {});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ((*placed)[0].cpus.size(), 12u);
  EXPECT_EQ((*placed)[0].mems, (std::vector<int>{0, 1}));
}

TEST(ResourceAllocatorTest, MixedPlanLargestFirst) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 15)), 16);
  // BERT at T=14 (paper Table 2): one 6-thread and two 4-thread instances.
  auto placed = alloc.Place({4, 6, 4}, {});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ((*placed)[1].cpus.size(), 6u);
  std::set<int> all;
  for (const Placement& p : *placed) {
    const int s = SocketOf(alloc.topology(), p.cpus[0]);
    for (int c : p.cpus) EXPECT_EQ(SocketOf(alloc.topology(), c), s);
    all.insert(p.cpus.begin(), p.cpus.end());
  }
  EXPECT_EQ(all.size(), 14u);
}

TEST(ResourceAllocatorTest, RestrictedCpusetUsesOnlyItsCpus) {
  FakeHost host;
  // A Kubernetes static-CPU-manager pod with exclusive CPUs 2,3,6,7 (two per socket).
  ResourceAllocator alloc(TwoSocketsSmt(host, {2, 3, 6, 7}), 4);
  auto placed = alloc.Place({2, 2}, {});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ((*placed)[0].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ((*placed)[1].cpus, (std::vector<int>{6, 7}));
  EXPECT_EQ(alloc.Place({2, 2, 1}, {}).status().code(), StatusCode::kResourceExhausted);
}

TEST(ResourceAllocatorTest, ExcludedCpusAreNeverGiven) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 7)), 8);
  auto placed = alloc.Place({2, 2}, {0, 1, 4, 5});
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ((*placed)[0].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ((*placed)[1].cpus, (std::vector<int>{6, 7}));
}

TEST(ResourceAllocatorTest, ShadowSetPrefersCpusNoLiveInstanceHolds) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 7)), 4);  // T = 4 of 8 CPUs
  auto old_set = alloc.Place({4}, {});
  ASSERT_TRUE(old_set.ok());
  CpuLease lease = alloc.Hold((*old_set)[0].cpus);
  EXPECT_EQ(alloc.holders((*old_set)[0].cpus[0]), 1);
  auto shadow = alloc.Place({2, 2}, {});
  ASSERT_TRUE(shadow.ok());
  for (const Placement& p : *shadow) {
    for (int c : p.cpus) EXPECT_EQ(alloc.holders(c), 0) << "cpu " << c;
  }
  lease = CpuLease();
  EXPECT_EQ(alloc.holders((*old_set)[0].cpus[0]), 0);
}

TEST(ResourceAllocatorTest, OverlapsTheOldSetWhenNoCpuIsFree) {
  FakeHost host;
  ResourceAllocator alloc(CpuTopology::Read(host.root(), {0, 1}), 2);  // this machine's shape
  CpuLease lease = alloc.Hold({0, 1});
  auto shadow = alloc.Place({1, 1}, {});
  ASSERT_TRUE(shadow.ok());
  EXPECT_EQ((*shadow)[0].cpus.size(), 1u);
  EXPECT_NE((*shadow)[0].cpus, (*shadow)[1].cpus);
}

}  // namespace
}  // namespace packrat

namespace packrat {
namespace {

// Shares: the node-wide view of which model may place where (model repository, partition).
TEST(ResourceAllocatorTest, SharesAreExclusiveAndFreeCpusExcludeThemAndHeldOnes) {
  FakeHost host;
  ResourceAllocator alloc(TwoSocketsSmt(host, Range(0, 7)), 8);
  EXPECT_EQ(alloc.Share("a"), std::nullopt);
  EXPECT_TRUE(alloc.OutsideShare("a").empty());  // no share: anywhere
  ASSERT_TRUE(alloc.SetShare("a", {3, 1}).ok());
  EXPECT_EQ(alloc.Share("a"), (std::vector<int>{1, 3}));
  const Status taken = alloc.SetShare("b", {3, 4});
  EXPECT_EQ(taken.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(taken.message().find("CPU 3 belongs to model 'a'"), std::string::npos);
  EXPECT_EQ(alloc.SetShare("b", {99}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(alloc.SetShare("b", {4, 5}).ok());
  CpuLease held = alloc.Hold({0});  // a model without a share runs an instance on CPU 0
  EXPECT_EQ(alloc.FreeCpus(), (std::vector<int>{2, 6, 7}));
  // Placing within a's share: everything outside it is excluded.
  auto placed = alloc.Place({2}, alloc.OutsideShare("a"));
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->front().cpus, (std::vector<int>{1, 3}));
  EXPECT_EQ(alloc.Place({3}, alloc.OutsideShare("a")).status().code(),
            StatusCode::kResourceExhausted);
  alloc.ReleaseShare("a");
  EXPECT_EQ(alloc.FreeCpus(), (std::vector<int>{1, 2, 3, 6, 7}));
  EXPECT_EQ(alloc.Shares().size(), 1u);
}

}  // namespace
}  // namespace packrat
