// The plan an `instances: auto` model starts serving on, before any load is seen.
#include "agent/model/model_profile.h"

#include "gtest/gtest.h"

namespace packrat {
namespace {

// One and two threads; a batch of b rows lasts 10·b ms at two threads, 15·b at one.
Optimizer LinearOptimizer() {
  Profile p;
  for (int t : {1, 2}) {
    for (int b = 1; b <= 64; b *= 2) {
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = (t == 2 ? 10.0 : 15.0) * b;
      EXPECT_TRUE(p.Add(point).ok());
    }
  }
  return Optimizer(std::move(p));
}

ModelConfig Model(int64_t max_batch, double max_batch_latency_ms) {
  ModelConfig m;
  m.batching.max_batch = max_batch;
  m.batching.max_batch_latency_ms = max_batch_latency_ms;
  return m;
}

TEST(FirstPlanTest, WithoutALatencyLimitServesMaxBatch) {
  const Optimizer optimizer = LinearOptimizer();
  StatusOr<Plan> plan = FirstPlan(Model(64, 0), optimizer, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->batch, 64);
}

TEST(FirstPlanTest, ALatencyLimitStartsAtTheLargestBatchWithinIt) {
  const Optimizer optimizer = LinearOptimizer();
  StatusOr<Plan> plan = FirstPlan(Model(64, 100), optimizer, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_LE(plan->latency_ms, 100);
  ASSERT_TRUE(optimizer.Solve(2, plan->batch + 1).ok());
  EXPECT_GT(optimizer.Solve(2, plan->batch + 1)->latency_ms, 100) << plan->ConfigString();
}

TEST(FirstPlanTest, ALimitNoPlanKeepsStartsAtTheFastestPlan) {
  const Optimizer optimizer = LinearOptimizer();
  StatusOr<Plan> plan = FirstPlan(Model(64, 5), optimizer, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->batch, 1);
}

}  // namespace
}  // namespace packrat
