#include "agent/model/worker_starter.h"

#include <gtest/gtest.h>

namespace packrat {
namespace {

TEST(DecideRuntimeStartTest, OnFreeCpusARuntimeStartsAsConfigured) {
  const RuntimeStart start = DecideRuntimeStart(ReconfigurationConfig{}, false, true);
  EXPECT_EQ(start.idle_start_s, 0);
  EXPECT_FALSE(start.warmup_while_idle);
  EXPECT_FALSE(start.cold);
}

TEST(DecideRuntimeStartTest, BesideAServingSetItStartsAtIdlePriorityWarmOnlyWhileThere) {
  ReconfigurationConfig rc;  // idle_start_s 3, skip_warmup_on_busy_cpus
  const RuntimeStart start = DecideRuntimeStart(rc, true, false);
  EXPECT_EQ(start.idle_start_s, 3);
  EXPECT_TRUE(start.warmup_while_idle);
  EXPECT_FALSE(start.cold);
  rc.skip_warmup_on_busy_cpus = false;  // warm up anyway
  EXPECT_FALSE(DecideRuntimeStart(rc, true, false).warmup_while_idle);
  EXPECT_FALSE(DecideRuntimeStart(rc, true, false).cold);
}

// A model behind needs the capacity now: normal priority, cold as before idle starts.
TEST(DecideRuntimeStartTest, AModelBehindStartsAtNormalPriorityCold) {
  const RuntimeStart start = DecideRuntimeStart(ReconfigurationConfig{}, true, true);
  EXPECT_EQ(start.idle_start_s, 0);
  EXPECT_FALSE(start.warmup_while_idle);
  EXPECT_TRUE(start.cold);
}

TEST(DecideRuntimeStartTest, NoIdleStartsMeansColdAsBefore) {
  ReconfigurationConfig rc;
  rc.idle_start_s = 0;
  const RuntimeStart start = DecideRuntimeStart(rc, true, false);
  EXPECT_EQ(start.idle_start_s, 0);
  EXPECT_TRUE(start.cold);
  rc.skip_warmup_on_busy_cpus = false;
  EXPECT_FALSE(DecideRuntimeStart(rc, true, false).cold);
}

}  // namespace
}  // namespace packrat
