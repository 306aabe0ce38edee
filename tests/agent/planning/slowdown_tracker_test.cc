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

// Whatever slowed the serving runtimes, a thread count not served yet keeps its profile.
TEST(SlowdownTrackerTest, AnUnmeasuredThreadCountKeepsItsProfile) {
  SlowdownTracker s(0.1, 2);
  s.Record(1, 3.0, kStart);
  s.Record(1, 3.0, kStart);
  s.Record(2, 1.2, kStart);  // one slice: not yet
  EXPECT_DOUBLE_EQ(s.Get(1), 3.0);
  EXPECT_FALSE(s.Measured(2));
  EXPECT_DOUBLE_EQ(s.Get(2), 1.0);
  EXPECT_DOUBLE_EQ(s.Get(16), 1.0);
  s.Record(2, 0.5, kStart);
  EXPECT_TRUE(s.Measured(2));
  EXPECT_DOUBLE_EQ(s.Get(2), 0.85);  // measured faster than the profile: counts so
  for (int i = 0; i < 30; ++i) s.Record(2, 0.25, kStart);
  EXPECT_DOUBLE_EQ(s.Get(2), 0.8);  // a stale profile counts no faster than `fastest`
  SlowdownTracker fast(0.1, 2);
  fast.Record(4, 0.5, kStart);
  fast.Record(4, 0.5, kStart);
  EXPECT_DOUBLE_EQ(fast.Get(1), 1.0);  // nor does another count's speed carry over
}

// Two thread counts measured slower than their profile: the node is, and a count not served yet
// counts at the least of their slowdowns (never faster than its profile).
TEST(SlowdownTrackerTest, TwoSlowThreadCountsSlowTheOnesNotYetServed) {
  SlowdownTracker s(0.1, 2);
  for (int i = 0; i < 2; ++i) s.Record(2, 1.8, kStart);
  EXPECT_DOUBLE_EQ(s.Get(8), 1.0);  // one count: maybe its neighbours, not the node
  for (int i = 0; i < 2; ++i) s.Record(8, 1.6, kStart);
  EXPECT_DOUBLE_EQ(s.Get(4), 1.6);
  EXPECT_FALSE(s.Measured(4));
  EXPECT_DOUBLE_EQ(s.Get(2), 1.8);  // a measured count keeps its own
  for (int i = 0; i < 2; ++i) s.Record(16, 0.9, kStart);
  EXPECT_DOUBLE_EQ(s.Get(4), 1.0);  // a third count served at its profile: the node is not slow
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
  EXPECT_FALSE(s.Measured(2));
}

}  // namespace
}  // namespace packrat
