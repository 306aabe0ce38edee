#include "agent/planning/plan_evaluator.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace packrat {
namespace {

// One thread: 100 ms + 50 ms a row; two threads: 60 ms + 30 ms a row; b = 1, 2, 4, 8.
Optimizer MakeOptimizer() {
  Profile p;
  for (int t = 1; t <= 2; ++t) {
    for (int b = 1; b <= 8; b *= 2) {
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = t == 1 ? 100.0 + 50.0 * b : 60.0 + 30.0 * b;
      EXPECT_TRUE(p.Add(point).ok());
    }
  }
  return Optimizer(std::move(p));
}

Plan PlanOf(std::vector<InstanceGroup> groups) {
  Plan plan;
  plan.groups = std::move(groups);
  plan.batch = static_cast<int>(TargetRows(plan.groups));
  return plan;
}

TEST(PlanEvaluatorTest, FullBatchesTakeTheSlowestGroupAtItsSlowdown) {
  const Optimizer optimizer = MakeOptimizer();
  const BatchingSimulator simulator;
  const PlanEvaluator plain(optimizer, simulator, {});
  const Plan mixed = PlanOf({{1, 2, 4}, {1, 1, 2}});  // 180 ms and 200 ms
  EXPECT_DOUBLE_EQ(plain.PredictedLatencyMs(mixed), 200);
  EXPECT_DOUBLE_EQ(plain.Capacity(mixed), 6 * 1e3 / 200);
  const PlanEvaluator slowed(optimizer, simulator, {},
                             [](int threads) { return threads == 2 ? 1.5 : 1.0; });
  EXPECT_DOUBLE_EQ(slowed.PredictedLatencyMs(mixed), 270);  // 180 × 1.5
}

TEST(PlanEvaluatorTest, TheBatchLatencyLimitMakesPlansTooSlow) {
  const Optimizer optimizer = MakeOptimizer();
  const BatchingSimulator simulator;
  PlanEvaluatorOptions options;
  options.max_batch_latency_ms = 250;
  const PlanEvaluator eval(optimizer, simulator, options);
  EXPECT_FALSE(eval.TooSlow(250));
  EXPECT_TRUE(eval.TooSlow(250.5));
  // Two one-thread instances: b = 2 each (200 ms) serves 20 rows/s; b = 4 each (300 ms) breaks
  // the limit.
  const std::optional<double> four = eval.CapacityOn({1, 1}, 4);
  ASSERT_TRUE(four.has_value());
  EXPECT_NEAR(*four, 20, 1e-9);
  EXPECT_FALSE(eval.CapacityOn({1, 1}, 8).has_value());
  PlanEvaluatorOptions unlimited;
  EXPECT_TRUE(PlanEvaluator(optimizer, simulator, unlimited).CapacityOn({1, 1}, 8).has_value());
}

TEST(PlanEvaluatorTest, SimulationBelowCapacityAndMaxRateWithinTheTarget) {
  const Optimizer optimizer = MakeOptimizer();
  const BatchingSimulator simulator(2000);
  const PlanEvaluator eval(optimizer, simulator, {});
  const Plan fat = PlanOf({{1, 2, 4}});  // 180 ms, 22 rows/s
  const BatchingSimulator::Result slow = eval.Simulate(fat, 2);
  const BatchingSimulator::Result busy = eval.Simulate(fat, 15);
  EXPECT_LT(slow.p99_ms, busy.p99_ms);
  EXPECT_LT(slow.mean_batch_rows, busy.mean_batch_rows);
  EXPECT_DOUBLE_EQ(eval.SimulatedP99Ms(fat, 15), busy.p99_ms);
  const std::optional<double> rate = eval.MaxRate(fat.groups, fat.batch, 1000);
  ASSERT_TRUE(rate.has_value());
  EXPECT_GT(*rate, 0);
  EXPECT_LE(*rate, eval.Capacity(fat) + 1e-9);
  EXPECT_LE(eval.SimulatedP99Ms(fat, *rate * 0.99), 1000 * 1.01);
  // A thread count the profile lacks has no rate.
  EXPECT_FALSE(eval.MaxRate({{1, 3, 4}}, 4, 1000).has_value());
}

TEST(PlanEvaluatorTest, ThreadCountsAndTargetRows) {
  const std::vector<InstanceGroup> groups = {{2, 1, 4}, {1, 2, 8}};
  EXPECT_EQ(ThreadCounts(groups), (std::vector<int>{1, 1, 2}));
  EXPECT_EQ(TargetRows(groups), 16);
}

}  // namespace
}  // namespace packrat
