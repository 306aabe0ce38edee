#include "emulator/contention.h"

#include <gtest/gtest.h>

namespace packrat::emulator {
namespace {

TEST(ContentionTest, ACpuSharedByKBusyThreadsRunsEachAtOneKth) {
  EXPECT_DOUBLE_EQ(ContentionRate({1, 1, 1, 16}, 0), 1.0);
  EXPECT_DOUBLE_EQ(ContentionRate({2, 2, 1, 16}, 0), 0.5);
  EXPECT_DOUBLE_EQ(ContentionRate({3, 2, 1, 16}, 0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(ContentionRate({0, 0, 1, 16}, 0), 1.0);  // not marked yet: as alone
}

TEST(ContentionTest, AnInstanceRunsAtItsSlowestCpu) {
  // Four threads on CPUs with 1, 1, 2 and 1 busy threads: the barrier waits for the shared one.
  EXPECT_DOUBLE_EQ(ContentionRate({2, 5, 4, 16}, 0), 0.5);
}

TEST(ContentionTest, BusyNeighboursCostTheirShareOfTheSlowdown) {
  // 2 own CPUs of 10; 4 of the 8 others busy: 1 + 0.2 * 0.5 = 1.1 times slower.
  EXPECT_DOUBLE_EQ(ContentionRate({1, 6, 2, 10}, 0.2), 1.0 / 1.1);
  // All others busy: the full 15%, and sharing a CPU multiplies in.
  EXPECT_DOUBLE_EQ(ContentionRate({1, 10, 2, 10}, 0.15), 1.0 / 1.15);
  EXPECT_DOUBLE_EQ(ContentionRate({2, 10, 2, 10}, 0.15), 0.5 / 1.15);
  // No others: nothing to share the memory bandwidth with.
  EXPECT_DOUBLE_EQ(ContentionRate({1, 4, 4, 4}, 0.3), 1.0);
}

TEST(ContentionTest, AnIdlePriorityInstanceRunsOnlyWhereItsCpusAreFree) {
  // The view counts others' busy threads only: none on its CPUs, it runs as alone.
  EXPECT_DOUBLE_EQ(IdleContentionRate({0, 0, 1, 16}, 0), 1.0);
  EXPECT_DOUBLE_EQ(IdleContentionRate({0, 7, 2, 16}, 0), 1.0);
  // One busy thread on any of its CPUs leaves it the idle class's share.
  EXPECT_DOUBLE_EQ(IdleContentionRate({1, 1, 1, 16}, 0), kIdlePriorityShare);
  EXPECT_DOUBLE_EQ(IdleContentionRate({3, 9, 4, 16}, 0), kIdlePriorityShare);
  // Neighbours still cost bandwidth: 2 own CPUs of 10, 4 of the 8 others busy.
  EXPECT_DOUBLE_EQ(IdleContentionRate({0, 4, 2, 10}, 0.2), 1.0 / 1.1);
  EXPECT_DOUBLE_EQ(IdleContentionRate({1, 4, 2, 10}, 0.2), kIdlePriorityShare / 1.1);
}

}  // namespace
}  // namespace packrat::emulator
