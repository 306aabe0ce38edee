// The progress integration of emulated computations, on hand-made time (FakeClock): no test
// here sleeps or depends on how busy the machine is.
#include "emulator/slice_progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "emulator/contention.h"
#include "shm/segment.h"
#include "shm/virtual_cpus.h"

namespace packrat::emulator {
namespace {

using std::chrono::milliseconds;

TEST(SliceProgressTest, AtFullSpeedTheWorkTakesItsDuration) {
  FakeClock clock;
  const SteadyTime start = clock.Now();
  SliceProgress p(milliseconds(100), start, 1.0);
  EXPECT_EQ(p.FinishAt(), start + milliseconds(100));
  clock.Advance(milliseconds(99));
  EXPECT_FALSE(p.Finished(clock.Now()));
  EXPECT_EQ(p.Done(clock.Now()), milliseconds(99));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(p.Finished(clock.Now()));
  clock.Advance(milliseconds(50));
  EXPECT_EQ(p.Done(clock.Now()), milliseconds(100));  // never more than the work
}

TEST(SliceProgressTest, ASharedCpuHalvesTheSpeedFromTheChangeOn) {
  FakeClock clock;
  const SteadyTime start = clock.Now();
  SliceProgress p(milliseconds(100), start, 1.0);
  clock.Advance(milliseconds(40));
  p.SetRate(clock.Now(), 0.5);  // a second thread joins the CPU at 40 ms
  EXPECT_EQ(p.Done(clock.Now()), milliseconds(40));
  EXPECT_EQ(p.FinishAt(), start + milliseconds(40 + 120));  // 60 ms left at half speed
  clock.Advance(milliseconds(60));
  p.SetRate(clock.Now(), 1.0);  // it leaves at 100 ms, 30 ms of work done meanwhile
  EXPECT_EQ(p.Done(clock.Now()), milliseconds(70));
  EXPECT_EQ(p.FinishAt(), start + milliseconds(130));
}

TEST(SliceProgressTest, AChangeSeenLateCountsFromWhenItHappened) {
  FakeClock clock;
  const SteadyTime start = clock.Now();
  SliceProgress p(milliseconds(100), start, 1.0);
  // The change happened at 20 ms; the computation woke at 30 ms and learns of it then.
  clock.Advance(milliseconds(30));
  p.SetRate(start + milliseconds(20), 0.25);
  EXPECT_EQ(p.Done(clock.Now()), std::chrono::microseconds(22500));  // 20 + 10 / 4 ms
  // A change reported before the last one counts at the last one's time: no time twice.
  p.SetRate(start + milliseconds(10), 0.5);
  EXPECT_EQ(p.Done(start + milliseconds(20)), milliseconds(20));
  EXPECT_EQ(p.FinishAt(), start + milliseconds(20 + 160));
}

TEST(SliceProgressTest, ZeroWorkIsDoneAtOnceAndAZeroRateStillEnds) {
  FakeClock clock;
  SliceProgress none(milliseconds(0), clock.Now(), 1.0);
  EXPECT_TRUE(none.Finished(clock.Now()));
  SliceProgress stalled(milliseconds(1), clock.Now(), 0.0);
  EXPECT_GT(stalled.rate(), 0.0);
  EXPECT_GT(stalled.FinishAt(), clock.Now());
}

// Three emulated instances on a real node state, their time given by hand: A and B share CPU
// 0, C has CPU 1 to itself. A (100 ms of work) starts at 0, B (100 ms) at 50 ms: A runs alone
// for 50 ms, then both at half speed until A ends at 150 ms; B has done 50 ms by then and ends
// at 200 ms. C is never slowed.
TEST(SliceProgressTest, InstancesSharingACpuSlowEachOtherOnTheNodeState) {
  const std::string name = shm::Segment::MakeName(getpid(), "progress-test");
  auto node_or = shm::VirtualCpus::Create(name, 4);
  ASSERT_TRUE(node_or.ok()) << node_or.status().ToString();
  shm::VirtualCpus& node = **node_or;
  const int a = *node.Claim(getpid()), b = *node.Claim(getpid()), c = *node.Claim(getpid());
  auto rate = [&](const std::vector<int>& cpus) {
    return ContentionRate(
        {node.MaxBusy(cpus), node.busy_cpus(), static_cast<int>(cpus.size()), node.num_cpus()},
        0.0);
  };
  FakeClock clock;
  const SteadyTime t0 = clock.Now();
  ASSERT_TRUE(node.Mark(a, {0}).ok());
  ASSERT_TRUE(node.Mark(c, {1}).ok());
  SliceProgress pa(milliseconds(100), t0, rate({0}));
  SliceProgress pc(milliseconds(100), t0, rate({1}));
  clock.Advance(milliseconds(50));
  ASSERT_TRUE(node.Mark(b, {0}).ok());
  SliceProgress pb(milliseconds(100), clock.Now(), rate({0}));
  pa.SetRate(clock.Now(), rate({0}));
  pc.SetRate(clock.Now(), rate({1}));
  EXPECT_DOUBLE_EQ(pa.rate(), 0.5);
  EXPECT_DOUBLE_EQ(pb.rate(), 0.5);
  EXPECT_DOUBLE_EQ(pc.rate(), 1.0);
  EXPECT_EQ(pc.FinishAt(), t0 + milliseconds(100));
  EXPECT_EQ(pa.FinishAt(), t0 + milliseconds(150));
  clock.Set(pa.FinishAt());
  node.Unmark(a);
  pb.SetRate(clock.Now(), rate({0}));
  EXPECT_EQ(pb.Done(clock.Now()), milliseconds(50));
  EXPECT_EQ(pb.FinishAt(), t0 + milliseconds(200));
}

}  // namespace
}  // namespace packrat::emulator
