#include "agent/planning/partition_policy.h"

#include <gtest/gtest.h>

#include <limits>

namespace packrat {
namespace {

using Time = std::chrono::steady_clock::time_point;
constexpr double kInf = std::numeric_limits<double>::infinity();

Time At(int ms) { return Time(std::chrono::milliseconds(ms)); }

// Two models: `a` would go from 8 to 12 CPUs, `b` from 8 to 4.
std::vector<PartitionModel> Shift(double a_now, double a_target, double b_now, double b_target,
                                  double rate = 100) {
  PartitionModel a{"a", 8, 12, rate, a_now, a_target, a_now / 10, a_target / 10, 1, {}, false, {}};
  PartitionModel b{"b", 8, 4, rate, b_now, b_target, b_now / 10, b_target / 10, 1, {}, false, {}};
  return {a, b};
}

TEST(PartitionPolicyTest, NoChangeHolds) {
  PartitionPolicy policy;
  std::vector<PartitionModel> same = Shift(50, 50, 20, 20);
  same[0].target_cpus = same[0].current_cpus;
  same[1].target_cpus = same[1].current_cpus;
  const PartitionDecision d = policy.Decide(same, At(0));
  EXPECT_FALSE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kNoChange);
}

TEST(PartitionPolicyTest, AClearGainMovesOnceConfirmed) {
  PartitionPolicy policy;  // 2 confirmations
  // a: 50 -> 20 ms, b: 20 -> 25 ms: the worst ratio 5.0 -> 2.5.
  PartitionDecision d = policy.Decide(Shift(50, 20, 20, 25), At(0));
  EXPECT_FALSE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kUnconfirmed);
  EXPECT_DOUBLE_EQ(d.worst_now, 5.0);
  EXPECT_DOUBLE_EQ(d.worst_target, 2.5);
  // gain = 60 s × 100/s × 30 ms; cost = 5 s × 100/s × (50 + 20) ms.
  EXPECT_DOUBLE_EQ(d.gain_ms, 60 * 100 * 30.0);
  EXPECT_DOUBLE_EQ(d.cost_ms, 5 * 100 * 70.0);
  d = policy.Decide(Shift(50, 20, 20, 25), At(1000));
  EXPECT_TRUE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kGain);
}

// A gain counts over as long as each model's rate is expected to hold: as long again as it has
// held, at most the horizon. a's rate stepped 2 s ago: 2 s of its 30-ms gain is less than the
// switch costs; after 30 s it is more.
TEST(PartitionPolicyTest, AGainRepaysItsSwitchOnlyOnceTheRateHasHeldLongEnough) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(50, 20, 20, 25);
  models[0].rate_age = models[1].rate_age = std::chrono::seconds(2);
  PartitionDecision d = policy.Decide(models, At(0));
  EXPECT_FALSE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kCostExceedsGain);
  // gain = 2 s × 100/s × 30 ms; cost = 5 s × 100/s × (50 + 20) ms.
  EXPECT_DOUBLE_EQ(d.gain_ms, 2 * 100 * 30.0);
  EXPECT_DOUBLE_EQ(d.cost_ms, 5 * 100 * 70.0);
  models[0].rate_age = models[1].rate_age = std::chrono::seconds(30);
  d = policy.Decide(models, At(1000));
  EXPECT_DOUBLE_EQ(d.gain_ms, 30 * 100 * 30.0);
  EXPECT_TRUE(d.move) << d.Why();
  EXPECT_EQ(d.reason, PartitionReason::kGain);
}

// Both models meet their p99 targets now: a's lower p99 on 12 CPUs does not pay for the 4
// CPUs b gives up, which its next burst would find gone. Once a misses its target, it moves.
TEST(PartitionPolicyTest, AGainWhereEveryModelMeetsItsTargetHolds) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(50, 20, 20, 25);
  models[0].slo_ms = 100;
  models[1].slo_ms = 100;
  for (int i = 0; i < 3; ++i) {
    const PartitionDecision d = policy.Decide(models, At(i * 1000));
    EXPECT_FALSE(d.move);
    EXPECT_EQ(d.reason, PartitionReason::kWithinTargets);
  }
  // a misses its target now: the move is for a p99 the target asks for.
  models[0].slo_ms = 40;
  PartitionPolicy other;
  EXPECT_EQ(other.Decide(models, At(0)).reason, PartitionReason::kUnconfirmed);
  EXPECT_TRUE(other.Decide(models, At(1000)).move);
}

TEST(PartitionPolicyTest, NoiseBelowMinGainHolds) {
  PartitionPolicy policy;
  for (int i = 0; i < 3; ++i) {
    const PartitionDecision d = policy.Decide(Shift(50, 46, 20, 21), At(i * 1000));
    EXPECT_FALSE(d.move);
    EXPECT_EQ(d.reason, PartitionReason::kBelowMinGain);
  }
}

TEST(PartitionPolicyTest, ASwitchThatCostsMoreThanItGainsHolds) {
  PartitionPolicyOptions options;
  options.horizon = std::chrono::seconds(1);  // little time to earn the switch back
  PartitionPolicy policy(options);
  for (int i = 0; i < 3; ++i) {
    const PartitionDecision d = policy.Decide(Shift(50, 20, 20, 25), At(i * 1000));
    EXPECT_FALSE(d.move);
    EXPECT_EQ(d.reason, PartitionReason::kCostExceedsGain);
  }
}

TEST(PartitionPolicyTest, AChangingTargetIsNotConfirmed) {
  PartitionPolicy policy;
  std::vector<PartitionModel> first = Shift(50, 20, 20, 25);
  std::vector<PartitionModel> second = first;
  second[0].target_cpus = 11;
  second[1].target_cpus = 5;
  EXPECT_EQ(policy.Decide(first, At(0)).reason, PartitionReason::kUnconfirmed);
  EXPECT_EQ(policy.Decide(second, At(1000)).reason, PartitionReason::kUnconfirmed);
  EXPECT_EQ(policy.Decide(first, At(2000)).reason, PartitionReason::kUnconfirmed);
  EXPECT_TRUE(policy.Decide(first, At(3000)).move);
}

TEST(PartitionPolicyTest, CooldownAfterAMoveAndItsMeasuredSwitchTime) {
  PartitionPolicy policy;
  policy.MoveDone(At(0), std::chrono::milliseconds(20000));  // a slow switch: 20 s
  PartitionDecision d = policy.Decide(Shift(50, 20, 20, 25), At(1000));
  EXPECT_DOUBLE_EQ(d.cost_ms, 20 * 100 * 70.0);
  d = policy.Decide(Shift(50, 20, 20, 25), At(2000));
  EXPECT_FALSE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kCooldown);
  d = policy.Decide(Shift(50, 20, 20, 25), At(10000));
  EXPECT_TRUE(d.move) << d.Why();
}

// On the planner's numbers a's 8 CPUs do not serve its rate at all (p99 ∞ even fully busy),
// but a is not behind: its share queues through the burst. That is no lack, and an infinite p99
// counts no gain: the move holds. Once a falls behind (its queue grows), it moves at once,
// unconfirmed.
TEST(PartitionPolicyTest, AModelThatThePlannerSaysLacksButThatKeepsUpMovesOnlyOnceBehind) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(kInf, 40, 20, 30);
  models[0].ratio_now = kInf;
  for (int ms : {0, 1000, 2000}) {
    const PartitionDecision d = policy.Decide(models, At(ms));
    EXPECT_FALSE(d.move);
    EXPECT_EQ(d.reason, PartitionReason::kCostExceedsGain);
    EXPECT_EQ(d.gain_ms, 0);
  }
  models[0].behind = true;
  const PartitionDecision d = policy.Decide(models, At(3000));
  EXPECT_TRUE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kUnsustained);
}

// Where the planner thinks a model keeps up but it is behind (its truth is slower than its
// profile), the observation counts: a target that leaves its CPUs alone lacks as the current
// partition does, one that gives it more (and sustains it, on the planner's numbers) does not.
TEST(PartitionPolicyTest, BehindOverrulesThePlannersNumbers) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(60, 40, 20, 30);
  models[0].behind = true;
  const PartitionDecision d = policy.Decide(models, At(0));
  EXPECT_TRUE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kUnsustained);
}

TEST(PartitionPolicyTest, AnOverloadedModelGrowsAtOnceUnlessThatStarvesAnother) {
  PartitionPolicy policy;
  // a is behind on 8 CPUs and would not keep up on 12 either (more arrives than the node can
  // serve): every CPU is capacity, and b keeps up on 4.
  std::vector<PartitionModel> models = Shift(kInf, kInf, 20, 30);
  models[0].ratio_now = models[0].ratio_target = kInf;
  models[0].behind = true;
  PartitionDecision d = policy.Decide(models, At(0));
  EXPECT_TRUE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kOverloaded);
  // Not where b would then fall behind too.
  PartitionPolicy other;
  models[1].p99_target_ms = models[1].ratio_target = kInf;
  d = other.Decide(models, At(0));
  EXPECT_FALSE(d.move);
}

// A move that would only swap which model falls behind is no overload growth: a keeps up on
// 12 CPUs but b not on 4, as a does not on 8 now. (The load was moving from b to a, and b's
// rate had not fallen yet: the move gave b one CPU.)
TEST(PartitionPolicyTest, AMoveThatOnlySwapsWhichModelFallsBehindHolds) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(kInf, 40, 20, kInf);
  models[0].ratio_now = kInf;
  models[0].behind = true;
  models[1].ratio_target = kInf;
  const PartitionDecision d = policy.Decide(models, At(0));
  EXPECT_FALSE(d.move);
}

// Both models fall behind now (b's queue grows, a's too); a gains by taking CPUs from b, which
// would then fall further behind. With b's p99 infinite both ways, its switch would count no
// cost and the gain would always win: such a move is never for gain. (At T = 64 one gave an
// idle model 8 CPUs of one that served 1000 req/s.)
TEST(PartitionPolicyTest, AGainNeverShrinksAModelThatThenFallsBehind) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(60, 40, kInf, kInf);
  models[1].ratio_now = models[1].ratio_target = kInf;
  models[1].behind = true;
  for (int i = 0; i < 3; ++i) {
    const PartitionDecision d = policy.Decide(models, At(20000 + 1000 * i));
    EXPECT_FALSE(d.move);
    EXPECT_EQ(d.reason, PartitionReason::kStarves);
    EXPECT_EQ(d.model, "b");
  }
}

TEST(PartitionPolicyTest, ANewModelGetsItsFloorAtOnce) {
  PartitionPolicy policy;
  std::vector<PartitionModel> models = Shift(20, 20, 20, 20, 0);
  models[1].current_cpus = 0;  // just loaded: no CPUs of its own yet
  models[1].target_cpus = 1;
  const PartitionDecision d = policy.Decide(models, At(0));
  EXPECT_TRUE(d.move);
  EXPECT_EQ(d.reason, PartitionReason::kFloor);
}

}  // namespace
}  // namespace packrat
