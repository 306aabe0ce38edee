#include "agent/planning/loaded_latency.h"

#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/bench_profiles.h"

namespace packrat {
namespace {

TEST(LoadedLatencyTest, BatchRowsAreWhatArrivesDuringOneBatch) {
  // 100 ms + 50 ms a row: at 10 rows/s a batch of 8 (500 ms) would see 5 rows arrive, one of 5
  // (350 ms) 4, one of 4 (300 ms) 3, one of 3 (250 ms) 3: batches of 3 rows.
  std::vector<int64_t> asked;
  const auto linear = [&](int64_t n) {
    asked.push_back(n);
    return 100.0 + 50.0 * static_cast<double>(n);
  };
  EXPECT_EQ(LoadedBatchRows(10, 8, linear), 3);
  EXPECT_EQ(asked, (std::vector<int64_t>{8, 5, 4, 3}));
  // At or above capacity (8 rows in 500 ms: 16 rows/s) every batch is full.
  EXPECT_EQ(LoadedBatchRows(16, 8, linear), 8);
  EXPECT_EQ(LoadedBatchRows(40, 8, linear), 8);
  // Next to no arrivals: one row a batch; b = 1 asks nothing.
  EXPECT_EQ(LoadedBatchRows(0, 8, linear), 1);
  asked.clear();
  EXPECT_EQ(LoadedBatchRows(10, 1, linear), 1);
  EXPECT_TRUE(asked.empty());
}

// One-thread ResNet-50-like points: 170 ms for 1 row, 320 for 2, 603 for 4.
Profile OneThreadProfile() {
  Profile profile;
  for (const auto& [batch, ms] :
       std::vector<std::pair<int, double>>{{1, 170}, {2, 320}, {4, 603}}) {
    ProfilePoint p;
    p.threads = 1;
    p.batch = batch;
    p.latency_ms = ms;
    EXPECT_TRUE(profile.Add(p).ok());
  }
  return profile;
}

Plan TwoThinInstances() {
  Plan plan;
  plan.threads_total = 2;
  plan.batch = 8;
  plan.latency_ms = 603;
  plan.groups = {InstanceGroup{2, 1, 4}};
  return plan;
}

TEST(LoadedLatencyTest, EachInstanceRunsItsShareOfTheRowsArriving) {
  const Profile profile = OneThreadProfile();
  const Plan plan = TwoThinInstances();
  const auto none = [](int) { return 1.0; };
  // 9 rows/s: 8 rows would take 603 ms (5.4 arrive), 6 rows are 3 an instance (461.5 ms,
  // between 2 and 4 rows), in which 4.2 arrive: batches of 5 rows, 3 on the busier instance.
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, profile, 9, none), 461.5);
  // 10 rows/s: 7 rows arrive in a full batch's 603 ms, 4 of them on one instance.
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, profile, 10, none), 603);
  // Above capacity (13.3 rows/s): full batches. At a trickle: one row, 170 ms.
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, profile, 20, none), 603);
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, profile, 0.1, none), 170);
  // Serving 20% slower than profiled: longer batches, more rows in each.
  const auto slower = [](int threads) { return threads == 1 ? 1.2 : 1.0; };
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, profile, 9, slower), 1.2 * 603);
}

TEST(LoadedLatencyTest, AGroupWithoutProfiledPointsCountsAtThePlansLatency) {
  Plan plan = TwoThinInstances();
  plan.groups = {InstanceGroup{1, 2, 8}};  // nothing at 2 threads in the profile
  EXPECT_DOUBLE_EQ(LoadedLatencyMs(plan, OneThreadProfile(), 0.1, [](int) { return 1.0; }), 603);
}

TEST(LoadedLatencyTest, BelowCapacityAnotherPlanForBMayRunThePartialBatchesFaster) {
  const Optimizer optimizer(testing::TwoCoreResNet50Profile());
  const auto none = [](int) { return 1.0; };
  // Plans judged by their batches' latency at the rate, at `slowdown`.
  const auto loaded = [&](double rate, const std::function<double(int)>& slowdown) {
    return [&optimizer, rate, slowdown](const Plan& plan) {
      return LoadedLatencyMs(plan, optimizer.profile(), rate, slowdown);
    };
  };
  auto best = optimizer.Solve(2, 8);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->groups, (std::vector<InstanceGroup>{{2, 1, 4}}));  // 591.8 ms full
  // 10 rows/s: ⟨2,1,4⟩ cuts batches of 5 rows, 3 on one thread (455.5 ms); the fat instance
  // cuts batches of 3 (218.6 ms), and serves 10 rows/s at 75% of its 13.3 rows/s.
  EXPECT_NEAR(LoadedLatencyMs(*best, optimizer.profile(), 10, none), 455.45, 1e-9);
  auto faster = FasterAtRate(optimizer, 2, 8, *best, 10, 0.8, none, loaded(10, none));
  ASSERT_TRUE(faster.has_value());
  EXPECT_EQ(faster->groups, (std::vector<InstanceGroup>{{1, 2, 8}}));
  EXPECT_NEAR(LoadedLatencyMs(*faster, optimizer.profile(), 10, none), 218.6, 1e-9);
  // A trickle: one row, 82.2 ms on two threads against 159.4 on one.
  faster = FasterAtRate(optimizer, 2, 8, *best, 0.5, 0.8, none, loaded(0.5, none));
  ASSERT_TRUE(faster.has_value());
  EXPECT_EQ(faster->groups, (std::vector<InstanceGroup>{{1, 2, 8}}));
  // 11 rows/s would keep the fat instance more than 80% busy: it would queue in every burst.
  EXPECT_FALSE(FasterAtRate(optimizer, 2, 8, *best, 11, 0.8, none, loaded(11, none)).has_value());
  EXPECT_TRUE(FasterAtRate(optimizer, 2, 8, *best, 11, 0.9, none, loaded(11, none)).has_value());
  // Two threads measured 40% slower than profiled: the thin plan stays.
  const auto slow_pairs = [](int threads) { return threads == 2 ? 1.4 : 1.0; };
  EXPECT_FALSE(FasterAtRate(optimizer, 2, 8, *best, 10, 0.8, slow_pairs, loaded(10, slow_pairs))
                   .has_value());
  // Nothing beats the fat instance where it is `best`.
  auto fat = optimizer.SolveOnInstances({2}, 8);
  ASSERT_TRUE(fat.ok());
  EXPECT_FALSE(FasterAtRate(optimizer, 2, 8, *fat, 10, 0.8, none, loaded(10, none)).has_value());
}

}  // namespace
}  // namespace packrat
