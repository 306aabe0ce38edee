// NextMigrationStep: the stages of a resize that hands cores over instead of starting the new
// runtimes beside the serving ones.
#include "agent/planning/migration.h"

#include <algorithm>
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

// Capacity: one row/s a thread.
double Threads(const std::vector<int>& instances) { return Sum(instances); }

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
    EXPECT_GE(Threads(step->instances), need);
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

}  // namespace
}  // namespace packrat
