// NextMigrationStep: the stages of a resize that hands cores over instead of starting the new
// runtimes beside the serving ones.
#include "agent/planning/migration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace packrat {
namespace {

std::vector<int> Sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end(), std::greater<int>());
  return v;
}

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

// Capacity: one row/s a thread; p99 the same for any stage.
StageEstimate Threads(const std::vector<int>& instances) { return {1.0 * Sum(instances), 10}; }

TEST(MigrationTest, WhatFitsTheFreeCpusIsOneSwitch) {
  // 4 one-thread runtimes serve; the target adds two 2-thread ones on 4 free CPUs.
  const auto step = NextMigrationStep({1, 1, 1, 1}, 4, {1, 1, 1, 1, 2, 2}, Threads, 8);
  ASSERT_TRUE(step.has_value());
  EXPECT_TRUE(step->final);
}

TEST(MigrationTest, NothingFitsTheFreeCpusAndNothingCanGo) {
  EXPECT_FALSE(NextMigrationStep({1, 1, 1, 1}, 2, {4}, Threads, 4).has_value());
  EXPECT_FALSE(NextMigrationStep({1, 1, 1, 1}, 0, {2, 2}, Threads, 4).has_value());
}

// The node partition's reshaping of ResNet-50 on 24 CPUs from one-thread runtimes to
// three-thread ones with 8 CPUs free and capacity to spare: every stage starts on free CPUs
// only and keeps the capacity the target needs, and the stages end in the target.
TEST(MigrationTest, ASetWithCapacityToSpareHandsCoresOverStageByStage) {
  std::vector<int> serving(16, 1);
  const std::vector<int> target(8, 3);
  const double need = 16;
  int free = 8;
  int stages = 0;
  for (;;) {
    const auto step = NextMigrationStep(serving, free, target, Threads, need);
    ASSERT_TRUE(step.has_value()) << "stuck after " << stages << " stage(s)";
    if (step->final) break;
    ++stages;
    ASSERT_LE(stages, 8);
    EXPECT_LE(Sum(step->started), free);
    EXPECT_GE(Threads(step->instances).capacity, need);
    EXPECT_EQ(Sum(step->instances), Sum(serving) + Sum(step->started) - Sum(step->dropped));
    free += Sum(step->dropped) - Sum(step->started);
    serving = step->instances;
  }
  EXPECT_GE(stages, 2);
  // The last switch starts what is missing, on the CPUs free by then.
  std::vector<int> missing = target;
  for (int t : serving) {
    auto it = std::find(missing.begin(), missing.end(), t);
    if (it != missing.end()) missing.erase(it);
  }
  EXPECT_LE(Sum(missing), free);
}

TEST(MigrationTest, ASetShortOfCapacityGrowsFirst) {
  // BERT-base growing from 8 to 24 CPUs under load: the target's 24 threads are needed, so
  // the first stage starts what fits and drops nothing.
  const auto step = NextMigrationStep({4, 4}, 16, {6, 6, 6, 6}, Threads, 24);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_EQ(step->started, (std::vector<int>{6, 6}));
  EXPECT_TRUE(step->dropped.empty());
  EXPECT_EQ(Sorted(step->instances), (std::vector<int>{6, 6, 4, 4}));
}

TEST(MigrationTest, DropsStopWhereTheStageWouldFallShortOfTheNeed) {
  const auto step = NextMigrationStep(std::vector<int>(16, 1), 4, {4, 4, 4, 4}, Threads, 18);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_EQ(step->started, (std::vector<int>{4}));
  EXPECT_EQ(step->dropped.size(), 2u);  // 16 + 4 - 2 = 18
}

TEST(MigrationTest, AStageThatStartsNothingMayStillDrop) {
  // Nothing fits the one free CPU, but two one-thread runtimes are to spare.
  const auto step = NextMigrationStep({4, 1, 1}, 1, {4, 2}, Threads, 4);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_TRUE(step->started.empty());
  EXPECT_EQ(step->dropped, (std::vector<int>{1, 1}));
  EXPECT_EQ(step->instances, (std::vector<int>{4}));
}

TEST(MigrationTest, KeptThreadCountsStay) {
  // Two 4-thread runtimes are in the target already; the one-thread ones go.
  const auto step = NextMigrationStep({4, 4, 1, 1, 1, 1}, 2, {4, 4, 2, 2, 2}, Threads, 12);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_EQ(step->started, (std::vector<int>{2}));
  EXPECT_EQ(step->dropped, (std::vector<int>{1, 1}));
  EXPECT_EQ(Sorted(step->instances), (std::vector<int>{4, 4, 2, 1, 1}));
}

// A stage's runtimes cut batches of `batch` / n rows each, a row 10 ms at one thread and t
// times faster at t threads (100 rows/s a thread); the p99 twice the slowest batch: fewer
// runtimes, larger batches, a higher p99.
StageEstimate Batches(const std::vector<int>& instances, double batch) {
  double capacity = 0, slowest_ms = 0;
  const double b = batch / static_cast<double>(instances.size());
  for (int t : instances) {
    capacity += 100.0 * t;
    slowest_ms = std::max(slowest_ms, 10 * b / t);
  }
  return {capacity, 2 * slowest_ms};
}

// GPT-2 at T = 64 moving from 12-thread runtimes to 8-thread ones (bench/virtual: a stage of
// four runtimes at b = 16 between sets at b = 8 and b = 4, p99 232 ms at a 100-ms target).
// Capacity alone would let the stage drop three 12-thread runtimes (2 800 rows/s left of 2 000
// needed), leaving 10.7-row batches on three runtimes; the p99 bound lets one go.
TEST(MigrationTest, DropsStopWhereTheStageWouldAnswerSlower) {
  const auto at_b32 = [](const std::vector<int>& instances) { return Batches(instances, 32); };
  const std::vector<int> serving = {12, 12, 12, 12, 8, 8}, target(8, 8);
  const double bound = StageP99BoundMs(at_b32, serving, target);
  EXPECT_DOUBLE_EQ(bound, (1 + kStageP99Slack) * at_b32(serving).p99_ms);  // target's is lower
  const auto step = NextMigrationStep(serving, 4, target, at_b32, 2000, bound);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_TRUE(step->started.empty());  // an 8 does not fit 4 CPUs
  EXPECT_EQ(step->dropped, (std::vector<int>{12}));
  EXPECT_LE(at_b32(step->instances).p99_ms, bound);
  // Without a bound, capacity alone decides.
  EXPECT_EQ(NextMigrationStep(serving, 4, target, at_b32, 2000)->dropped.size(), 3u);
}

// Where nothing can start and every drop costs p99 beyond the bound, the stage still makes
// progress: it frees the CPUs for one missing runtime and no more (capacity alone would leave
// one two-thread runtime of four).
TEST(MigrationTest, AStageThatCanOnlyDropFreesWhatTheNextStartNeeds) {
  const auto at_b12 = [](const std::vector<int>& instances) { return Batches(instances, 12); };
  const double bound = StageP99BoundMs(at_b12, {2, 2, 2, 2}, {4, 4});
  const auto step = NextMigrationStep({2, 2, 2, 2}, 0, {4, 4}, at_b12, 200, bound);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_TRUE(step->started.empty());
  EXPECT_EQ(step->dropped, (std::vector<int>{2, 2}));
  EXPECT_EQ(step->instances, (std::vector<int>{2, 2}));
  // The next stage starts a four-thread runtime on them.
  const auto next = NextMigrationStep(step->instances, 4, {4, 4}, at_b12, 200, bound);
  ASSERT_TRUE(next.has_value());
  ASSERT_FALSE(next->final);
  EXPECT_EQ(next->started, (std::vector<int>{4}));
}

// A stage that starts nothing serves only to free CPUs: where the drops within the bound free
// too few for the next start, the same stage drops the fewest more (before, a stage of its own
// dropped one two-thread runtime and the next the one the start needed).
TEST(MigrationTest, AStageThatStartsNothingFreesTheNextStartsCpusAtOnce) {
  const auto at_b12 = [](const std::vector<int>& instances) { return Batches(instances, 12); };
  const std::vector<int> serving = {2, 2, 2, 2, 1, 1}, target = {4, 4};
  const double bound = StageP99BoundMs(at_b12, serving, target);
  // One 2 can go within the bound (six runtimes to five), a second cannot (to four).
  EXPECT_LE(at_b12({2, 2, 2, 1, 1}).p99_ms, bound);
  EXPECT_GT(at_b12({2, 2, 1, 1}).p99_ms, bound);
  const auto step = NextMigrationStep(serving, 0, target, at_b12, 200, bound);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_TRUE(step->started.empty());
  EXPECT_EQ(step->dropped, (std::vector<int>{2, 2}));
  const auto next = NextMigrationStep(step->instances, 4, target, at_b12, 200, bound);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->started, (std::vector<int>{4}));
}

// Where the drops that keep capacity cannot free the CPUs of the smallest missing runtime, no
// stage helps: dropping some would only leave fewer runtimes beside the plain switch's start.
TEST(MigrationTest, AStageThatCannotFreeEnoughIsNoStage) {
  EXPECT_FALSE(NextMigrationStep({3, 3, 3}, 0, {8}, Threads, 3).has_value());
  EXPECT_FALSE(NextMigrationStep({2, 2}, 0, {8}, Threads, 0).has_value());
}

TEST(MigrationTest, AStageKeepsOneRuntime) {
  // Capacity asks nothing (need 0), yet the last serving runtime stays until the target starts.
  const auto step = NextMigrationStep({2, 2}, 4, {6}, Threads, 0);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_EQ(step->instances, (std::vector<int>{2}));
  EXPECT_TRUE(NextMigrationStep(step->instances, 6, {6}, Threads, 0)->final);
}

// Capacity 100 rows/s a thread, a p99 of 10 ms that an overloaded stage's simulation would
// report anyway (its queue grows for as long as it runs): 350 rows/s arrive.
StageEstimate AtRate350(const std::vector<int>& instances) {
  const double capacity = 100.0 * Sum(instances);
  return {capacity, 10, capacity <= 350};
}

// A move out of overload is bounded by its target alone; where both ends are overloaded, only
// capacity decides.
TEST(MigrationTest, TheBoundIgnoresAnOverloadedEnd) {
  const auto slow_when_overloaded = [](const std::vector<int>& instances) {
    StageEstimate e = AtRate350(instances);
    if (e.overloaded) e.p99_ms = 5000;  // whatever the simulation ran to
    return e;
  };
  EXPECT_DOUBLE_EQ(StageP99BoundMs(slow_when_overloaded, {1, 1, 1}, {2, 2}),
                   (1 + kStageP99Slack) * 10);
  EXPECT_TRUE(std::isinf(StageP99BoundMs(slow_when_overloaded, {1, 1, 1}, {1, 2})));
}

TEST(MigrationTest, AnOverloadedStageBreaksAnyFiniteBound) {
  // 4 x <1> (400 rows/s) to 2 x <2>, one CPU free: dropping a <1> leaves 300 rows/s for 350
  // arriving. Its 10-ms p99 does not count: only the drop that frees the <2>'s second CPU goes.
  const double bound = StageP99BoundMs(AtRate350, {1, 1, 1, 1}, {2, 2});
  const auto step = NextMigrationStep({1, 1, 1, 1}, 1, {2, 2}, AtRate350, 200, bound);
  ASSERT_TRUE(step.has_value());
  ASSERT_FALSE(step->final);
  EXPECT_EQ(step->dropped, (std::vector<int>{1}));
  // Capacity alone (no bound) drops down to the 200 rows/s needed.
  EXPECT_EQ(NextMigrationStep({1, 1, 1, 1}, 1, {2, 2}, AtRate350, 200)->dropped.size(), 2u);
}

}  // namespace
}  // namespace packrat
