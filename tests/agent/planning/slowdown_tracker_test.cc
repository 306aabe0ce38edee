#include "agent/planning/slowdown_tracker.h"

#include <chrono>

#include "gtest/gtest.h"

namespace packrat {
namespace {

using std::chrono::seconds;
const SlowdownTracker::SteadyTime kStart{};

TEST(SlowdownTrackerTest, CountsFromMinSlicesOnAsMeanThenEwma) {
  SlowdownTracker s(/*alpha=*/0.25, /*min_slices=*/4);
  EXPECT_EQ(s.Get(1), 1.0);  // nothing measured: the profile's figures
  for (int i = 0; i < 3; ++i) s.Record(1, 2.0, kStart);
  EXPECT_EQ(s.Get(1), 1.0);  // three slices say too little
  s.Record(1, 1.0, kStart);
  EXPECT_DOUBLE_EQ(s.Get(1), 1.75);  // the mean of the first four (1/alpha)
  s.Record(1, 3.0, kStart);
  EXPECT_DOUBLE_EQ(s.Get(1), 1.75 + 0.25 * (3.0 - 1.75));  // then an EWMA
}

TEST(SlowdownTrackerTest, AnUnmeasuredThreadCountIsTheSlowestMeasured) {
  SlowdownTracker s(0.1, 2);
  s.Record(1, 1.5, kStart);
  s.Record(1, 1.5, kStart);
  s.Record(2, 1.2, kStart);  // one slice: not yet
  EXPECT_DOUBLE_EQ(s.Get(2), 1.5);
  EXPECT_DOUBLE_EQ(s.Get(4), 1.5);
  s.Record(2, 0.5, kStart);
  EXPECT_DOUBLE_EQ(s.Get(2), 0.85);  // measured faster than the profile: counts so
}

TEST(SlowdownTrackerTest, AFatterThreadCountMeasuredFasterThanTheProfileSpeedsThinnerOnes) {
  SlowdownTracker s(0.1, 2);
  s.Record(2, 0.9, kStart);
  s.Record(2, 0.9, kStart);
  EXPECT_DOUBLE_EQ(s.Get(2), 0.9);
  // Not served yet, thinner: the drift that speeds the fat instance speeds it too.
  EXPECT_DOUBLE_EQ(s.Get(1), 0.9);
  // Fatter: a thinner count's speed may come from idle neighbours, which it lacks.
  EXPECT_DOUBLE_EQ(s.Get(4), 1.0);
  s.Record(1, 1.1, kStart);
  s.Record(1, 1.1, kStart);
  EXPECT_DOUBLE_EQ(s.Get(1), 1.1);  // measured: its own figure
  EXPECT_DOUBLE_EQ(s.Get(4), 1.1);  // the slowest measured
  for (int i = 0; i < 30; ++i) s.Record(2, 0.25, kStart);
  EXPECT_DOUBLE_EQ(s.Get(2), 0.8);  // a stale profile counts no faster than `fastest`
  SlowdownTracker stale(0.1, 2);
  stale.Record(4, 0.25, kStart);
  stale.Record(4, 0.25, kStart);
  EXPECT_DOUBLE_EQ(stale.Get(1), 0.8);  // nor for the unmeasured ones
}

TEST(SlowdownTrackerTest, AThinnerThreadCountMeasuredFasterThanTheProfileLeavesFatterOnesAtOne) {
  SlowdownTracker s(0.1, 2);
  s.Record(1, 0.9, kStart);
  s.Record(1, 0.9, kStart);
  EXPECT_DOUBLE_EQ(s.Get(1), 0.9);
  EXPECT_DOUBLE_EQ(s.Get(2), 1.0);  // not served yet: no better than its profile
}

TEST(SlowdownTrackerTest, ExploringScalesAMeasuredExcessToEachCountsNeighbours) {
  SlowdownTracker s(0.1, 2);
  EXPECT_DOUBLE_EQ(s.Exploring(16, 16), 1.0);  // nothing measured: the profile
  s.Record(1, 1.45, kStart);
  EXPECT_FALSE(s.Measured(1));
  s.Record(1, 1.45, kStart);
  EXPECT_TRUE(s.Measured(1));
  EXPECT_DOUBLE_EQ(s.Exploring(1, 16), 1.45);  // measured: its own figure, as Get
  // One thread beside 15 busy CPUs ran 0.45 slow: 0.03 per busy neighbour CPU.
  EXPECT_DOUBLE_EQ(s.Get(16), 1.45);             // planning: the slowest served
  EXPECT_DOUBLE_EQ(s.Exploring(16, 16), 1.0);    // no neighbours: its profile
  EXPECT_NEAR(s.Exploring(4, 16), 1.36, 1e-12);  // 12 of 15
  EXPECT_NEAR(s.Exploring(8, 16), 1.24, 1e-12);  // 8 of 15
  EXPECT_DOUBLE_EQ(s.Exploring(16, 8), 1.0);     // a smaller budget: none beyond it either
  // Served, a count is measured, whatever it was guessed to be; the nearest measured count
  // guesses for the others.
  s.Record(4, 1.1, kStart);
  s.Record(4, 1.1, kStart);
  EXPECT_DOUBLE_EQ(s.Exploring(4, 16), 1.1);
  EXPECT_NEAR(s.Exploring(6, 16), 1 + 0.1 * 10 / 12, 1e-12);
  EXPECT_NEAR(s.Exploring(2, 16), 1 + 0.45 * 14 / 15, 1e-12);  // nearest: one thread
  // A count served no slower than profiled shows drift, not neighbours: others at most 1.
  SlowdownTracker fast(0.1, 2);
  fast.Record(4, 0.9, kStart);
  fast.Record(4, 0.9, kStart);
  EXPECT_DOUBLE_EQ(fast.Exploring(1, 16), 0.9);
  EXPECT_DOUBLE_EQ(fast.Exploring(8, 16), 1.0);
  // The fat count slowed has no neighbours to blame: at most 1 for the others.
  SlowdownTracker fat(0.1, 2);
  fat.Record(16, 1.2, kStart);
  fat.Record(16, 1.2, kStart);
  EXPECT_DOUBLE_EQ(fat.Exploring(1, 16), 1.0);
}

TEST(SlowdownTrackerTest, SlicesThatOverlapASwitchAreLeftOut) {
  SlowdownTracker s(0.1, 1);
  s.BeginSwitch();
  s.Record(1, 3.0, kStart + seconds(1));  // ran beside starting runtimes
  EXPECT_EQ(s.Get(1), 1.0);
  s.EndSwitch(kStart + seconds(5));
  s.Record(1, 3.0, kStart + seconds(4));  // began before the switch ended
  EXPECT_EQ(s.Get(1), 1.0);
  s.Record(1, 1.2, kStart + seconds(6));
  EXPECT_DOUBLE_EQ(s.Get(1), 1.2);
  // Overlapping switches: slices count again only after the last has ended.
  s.BeginSwitch();
  s.BeginSwitch();
  s.EndSwitch(kStart + seconds(7));
  s.Record(2, 2.0, kStart + seconds(8));
  s.EndSwitch(kStart + seconds(9));
  EXPECT_DOUBLE_EQ(s.Get(2), 1.2);  // unmeasured: the slowest measured
}

}  // namespace
}  // namespace packrat
