#include "agent/planning/batch_for_rate.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace packrat {
namespace {

// Capacities (rows/s) shaped like ResNet-50's on two cores: the plan for B = 1 serves ~15
// rows/s, larger batches serve more, with diminishing returns.
CapacityFn Table(std::map<int64_t, double> table, std::vector<int64_t>* asked = nullptr) {
  return [table = std::move(table), asked](int64_t b) -> std::optional<double> {
    if (asked) asked->push_back(b);
    auto it = table.find(b);
    if (it == table.end()) return std::nullopt;
    return it->second;
  };
}

const std::map<int64_t, double> kResNet = {{1, 15.0},  {2, 16.1},  {4, 16.5}, {8, 18.6},
                                           {16, 18.9}, {32, 19.0}, {64, 19.1}};

TEST(BatchForRateTest, SmallestBatchThatKeepsUpWithHeadroom) {
  // 14 rows/s at most 0.8 busy: 17.5 rows/s of capacity, first reached at B = 8.
  EXPECT_EQ(BatchForRate(14, 1, 64, 0.8, Table(kResNet)), 8);
  // At 12 rows/s B = 2 already serves 16.1 >= 15.
  EXPECT_EQ(BatchForRate(12, 1, 64, 0.8, Table(kResNet)), 2);
  // Only batches above the current one are candidates.
  EXPECT_EQ(BatchForRate(12, 4, 64, 0.8, Table(kResNet)), 8);
}

TEST(BatchForRateTest, WhenNothingKeepsUpTheSmallestBatchNearTheMostCapacity) {
  // 19.1 at most; 18.6 (B = 8) is within 5% of it, and its batches take an eighth as long.
  EXPECT_EQ(BatchForRate(30, 1, 64, 0.8, Table(kResNet)), 8);
  EXPECT_EQ(BatchForRate(30, 1, 64, 0.8, Table({{1, 10}, {2, 12}, {4, 20}, {8, 30}})), 8);
  EXPECT_EQ(BatchForRate(30, 1, 4, 0.8, Table(kResNet)), 2);  // 16.1 is within 5% of 16.5
}

TEST(BatchForRateTest, NothingWhenNoLargerBatchServesFivePercentMore) {
  EXPECT_EQ(BatchForRate(30, 16, 64, 0.8, Table(kResNet)), std::nullopt);  // 19.1 < 1.05 × 18.9
  EXPECT_EQ(BatchForRate(30, 8, 64, 0.8, Table(kResNet)), std::nullopt);   // 19.1 < 1.05 × 18.6
  EXPECT_EQ(BatchForRate(30, 64, 64, 0.8, Table(kResNet)), std::nullopt);
  EXPECT_EQ(BatchForRate(30, 1, 1, 0.8, Table(kResNet)), std::nullopt);
}

TEST(BatchForRateTest, SkipsBatchesWithoutAPlanAndEndsAtMaxBatch) {
  std::vector<int64_t> asked;
  // max_b = 48 is not a power of two: 1, 2, ..., 32, then 48 itself.
  const auto b = BatchForRate(100, 1, 48, 0.8, Table({{1, 10}, {4, 20}, {48, 90}}, &asked));
  EXPECT_EQ(b, 48);
  const std::vector<int64_t> candidates = {2, 4, 8, 16, 32, 48, 1};  // 1: the current plan
  EXPECT_EQ(asked, candidates);
}

// A memory-bound model's plans: capacity flat in b (rows/s), each b's batch twice as long.
const std::map<int64_t, double> kFlat = {{1, 250}, {2, 263}, {4, 270}, {8, 274}, {16, 276}};

TEST(BatchForRateTest, AnOverloadTakesTheLowestP99AmongThePlansThatKeepUp) {
  // 220 rows/s over 2 s: a plan keeps up beyond chance above 220 + 2·√440 / 2 = 241 rows/s,
  // so every b serves it, most only 0.8–0.84 busy. The p99 at the rate ranks them.
  const std::map<int64_t, double> p99 = {{1, 400}, {2, 180}, {4, 175}, {8, 300}, {16, 560}};
  EXPECT_EQ(OverloadBatch(220, 2, 16, 0, Table(kFlat), Table(p99)), 2);  // 180 ≤ 1.05 × 175
  const std::map<int64_t, double> p99_4 = {{1, 400}, {2, 190}, {4, 175}, {8, 300}, {16, 560}};
  EXPECT_EQ(OverloadBatch(220, 2, 16, 0, Table(kFlat), Table(p99_4)), 4);
  // A p99 not known ranks last.
  EXPECT_EQ(OverloadBatch(220, 2, 16, 0, Table(kFlat), Table({{16, 560}})), 16);
}

TEST(BatchForRateTest, AnOverloadCountsOnlyPlansThatServeMoreThanTheFloor) {
  const std::map<int64_t, double> p99 = {{1, 400}, {2, 180}, {4, 175}, {8, 300}, {16, 560}};
  // The serving set runs 255 rows/s; a move must serve 5% more (267.75): b = 2 is out.
  EXPECT_EQ(OverloadBatch(220, 2, 16, 267.75, Table(kFlat), Table(p99)), 4);
  EXPECT_EQ(OverloadBatch(220, 2, 16, 276, Table(kFlat), Table(p99)), std::nullopt);
}

TEST(BatchForRateTest, APlanWithinChanceOfTheRateDoesNotKeepUp) {
  // 262 rows/s over 2 s: keeping up takes more than 262 + 2·√524 / 2 = 285 rows/s, which no
  // plan serves: the smallest b within 5% of the most (276 · 0.95 = 262.2), whatever its p99.
  const std::map<int64_t, double> p99 = {{1, 900}, {2, 500}, {4, 600}, {8, 700}, {16, 800}};
  EXPECT_EQ(OverloadBatch(262, 2, 16, 0, Table(kFlat), Table(p99)), 2);
  // That b must serve more than the floor: no larger b is taken for the few percent it adds.
  EXPECT_EQ(OverloadBatch(262, 2, 16, 265, Table(kFlat), Table(p99)), std::nullopt);
  EXPECT_FALSE(KeepsUpBeyondChance(262, 2, 276));
  EXPECT_TRUE(KeepsUpBeyondChance(262, 2, 286));
  // Over a longer span the same rate is told from the capacity sooner.
  EXPECT_TRUE(KeepsUpBeyondChance(262, 8, 276));
}

TEST(BatchForRateTest, StepUpStopsWhereCapacityStopsGrowing) {
  // The estimate is 64: B = 8 serves 18.6 rows/s, within 5% of B = 64's 19.1, in batches an
  // eighth as long.
  EXPECT_EQ(StepUpBatch(1, 64, Table(kResNet)), 8);
  EXPECT_EQ(StepUpBatch(4, 64, Table(kResNet)), 8);
  // Up to the estimate only: B = 2's 16.1 is within 5% of B = 4's 16.5.
  EXPECT_EQ(StepUpBatch(1, 4, Table(kResNet)), 2);
  // Where capacity grows all the way, the estimate itself.
  EXPECT_EQ(StepUpBatch(1, 8, Table({{1, 10}, {2, 12}, {4, 20}, {8, 30}})), 8);
}

TEST(BatchForRateTest, NoStepUpWhenNoLargerBatchServesFivePercentMore) {
  EXPECT_EQ(StepUpBatch(8, 64, Table(kResNet)), std::nullopt);  // 19.1 < 1.05 × 18.6
  EXPECT_EQ(StepUpBatch(16, 32, Table(kResNet)), std::nullopt);
  EXPECT_EQ(StepUpBatch(8, 8, Table(kResNet)), std::nullopt);
  // A current batch without a plan counts as serving nothing.
  EXPECT_EQ(StepUpBatch(3, 8, Table({{4, 10}, {8, 10.2}})), 4);
}

// Inception-v3 on 2 cores, from the fat plan for B = 8 (7.85 rows/s): the plan for B = 1 is one
// two-thread instance, for B = 2 two one-thread ones, for B = 4 two at b = 2.
const std::map<int64_t, double> kInception = {{1, 6.75}, {2, 7.8}, {4, 7.26}, {8, 7.85}};

// No known rate: no simulated p99 to rank the candidates by.
const P99Fn kNoRate = [](int64_t) -> std::optional<double> { return std::nullopt; };

P99Fn P99Table(std::map<int64_t, double> table) {
  return [table = std::move(table)](int64_t b) -> std::optional<double> {
    auto it = table.find(b);
    if (it == table.end()) return std::nullopt;
    return it->second;
  };
}

TEST(BatchForRateTest, StepDownGoesOnlyAsFarAsTheRecentPeaksAllow) {
  // Poisson arrivals at 5.6 rows/s: over 30 s the busiest 2 s see 9.5 rows/s, 4 s 8, 8 s 7.
  const RateOverFn peaks = [](int64_t ms) -> std::optional<double> {
    return ms == 2000 ? 9.49 : ms == 4000 ? 8.0 : 7.0;
  };
  std::vector<int64_t> asked;
  // B = 1 at 80% of 6.75 rows/s expects 10.8 rows in 2 s, and the overload bar is 10.8 +
  // 2·√10.8 = 17.4 rows: the peak's 19 would have moved B back up. B = 2's bar is 19.55.
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, peaks, Table(kInception, &asked), kNoRate), 2);
  EXPECT_EQ(asked, (std::vector<int64_t>{8, 1, 2, 4}));  // every candidate, to rank those that pass
  // A peak that any smaller plan would have fallen behind: stay.
  const RateOverFn busy = [](int64_t) -> std::optional<double> { return 12.0; };
  asked.clear();
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, busy, Table(kInception, &asked), kNoRate), std::nullopt);
  EXPECT_EQ(asked, (std::vector<int64_t>{8, 1, 2, 4}));  // the serving B's capacity first
  // ... unless a smaller plan serves more than the serving one: the peak overloads that as
  // much. 16 one-thread ResNet-50 instances (the published profile): slices of 64 rows serve
  // 215 rows/s, of 4 rows 290; at a peak of 303 rows/s, B = 1024 steps down to 64.
  const RateOverFn peak303 = [](int64_t) -> std::optional<double> { return 303.0; };
  EXPECT_EQ(
      StepDownBatch(1024, 64, 2000, 0.8, peak303,
                    Table({{64, 290}, {128, 285}, {256, 284}, {512, 250}, {1024, 215}}), kNoRate),
      64);
  // Without a window's history there is no peak to fear: the estimate itself.
  const RateOverFn young = [](int64_t) -> std::optional<double> { return std::nullopt; };
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, young, Table(kInception), kNoRate), 1);
  // Not a step down.
  EXPECT_EQ(StepDownBatch(2, 2, 2000, 0.8, peaks, Table(kInception), kNoRate), std::nullopt);
  EXPECT_EQ(StepDownBatch(2, 4, 2000, 0.8, peaks, Table(kInception), kNoRate), std::nullopt);
}

TEST(BatchForRateTest, StepDownTakesTheSmallestBatchNearTheLowestSimulatedP99) {
  const RateOverFn calm = [](int64_t) -> std::optional<double> { return 4.5; };
  // Every candidate passes the bar; B = 1 queues its single rows (1,300 ms), B = 2 does not.
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 1300}, {2, 600}, {4, 620}})),
            2);
  // Within 5% of the lowest: the smaller batch.
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 625}, {2, 600}, {4, 500}})),
            4);
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 520}, {2, 600}, {4, 500}})),
            1);
  // Only candidates that pass the bar are ranked: at these peaks B = 1 and B = 4 would have
  // been overloaded (bars of 17.4 and 18.4 rows in 2 s against 19), B = 2 not (19.55).
  const RateOverFn peaks = [](int64_t ms) -> std::optional<double> {
    return ms == 2000 ? 9.49 : ms == 4000 ? 8.0 : 7.0;
  };
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, peaks, Table(kInception),
                          P99Table({{1, 100}, {2, 600}, {4, 500}})),
            2);
  // The serving plan (B = 8) counts too: where its requests fare as well as the best
  // candidate's (within 5%) or better, stay: a step down gives up capacity for nothing.
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 1300}, {2, 600}, {4, 620}, {8, 580}})),
            std::nullopt);
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 1300}, {2, 600}, {4, 620}, {8, 620}})),
            std::nullopt);
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 1300}, {2, 600}, {4, 620}, {8, 640}})),
            2);
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception),
                          P99Table({{1, 1300}, {2, 600}, {4, 620}, {8, 500}})),
            std::nullopt);
  // Inception-v3 at 11 rows/s on a faster host, from B = 2 towards 1: the serving plan's 203
  // ms against 237 (the step from 2 to 1 had followed 10 s after the one from 8 to 2).
  const RateOverFn light = [](int64_t) -> std::optional<double> { return 11.0; };
  EXPECT_EQ(StepDownBatch(2, 1, 2000, 0.8, light, Table({{1, 20.3}, {2, 24.5}}),
                          P99Table({{1, 237}, {2, 203}})),
            std::nullopt);
  // A candidate without a p99 (no plan simulated): no ranking, the smallest that passes.
  EXPECT_EQ(StepDownBatch(8, 1, 2000, 0.8, calm, Table(kInception), P99Table({{2, 600}, {4, 500}})),
            1);
}

// Inception-v3's published 16-core profile at 25.3 rows/s (BatchingSimulator, max_delay 2 ms):
// the serving 16 x <1> (B = 64) p99 113 ms, 307 rows/s; B's lowest-p99 plans 2 x <8> (31 ms,
// 197 rows/s from a backlog); 4 x <4> (B >= 4) 36 ms, 273 rows/s; 8 x <2> (B >= 8) 62 ms, 291.
BurstReserve InceptionReserve(double slack_ms, int64_t serving_b) {
  // Per b, the plans as (rows/s from a backlog, p99 ms); the first is PlanFor's, and the
  // serving plan's where b is serving_b.
  static const std::map<int64_t, std::vector<std::pair<double, double>>> kPlans = {
      {2, {{197, 30.7}}},
      {4, {{197, 30.7}, {273, 36.3}}},
      {8, {{197, 30.8}, {273, 36.3}, {291, 62.1}}},
      {16, {{273, 36.3}, {291, 62.1}}},
      {32, {{273, 36.4}, {291, 62.1}}},
      {64, {{307, 113.1}}}};
  BurstReserve reserve;
  reserve.slack_ms = slack_ms;
  reserve.burst = [](int64_t b) -> std::optional<double> { return kPlans.at(b).front().first; };
  reserve.most_within = [serving_b](int64_t b,
                                    double ceiling_ms) -> std::optional<std::pair<double, double>> {
    std::optional<std::pair<double, double>> most;
    const auto& plans = kPlans.at(b);
    for (size_t i = 0; i < (b == serving_b ? 1 : plans.size()); ++i) {
      const auto& plan = plans[i];
      if (plan.second <= ceiling_ms && (!most || plan.first > most->first)) most = plan;
    }
    return most;
  };
  return reserve;
}

TEST(BatchForRateTest, StepDownKeepsRuntimesThatAbsorbABurstWhereTheirP99IsNearTheLowest) {
  const RateOverFn calm = [](int64_t) -> std::optional<double> { return 25.3; };
  const CapacityFn capacity =
      Table({{2, 119}, {4, 179}, {8, 223}, {16, 265}, {32, 290}, {64, 307}});
  const P99Fn p99 =
      P99Table({{2, 30.7}, {4, 30.7}, {8, 30.8}, {16, 36.3}, {32, 36.4}, {64, 113.1}});
  bool for_burst = true;
  // Without a reserve: the smallest B near the lowest p99, 2 x <8>.
  EXPECT_EQ(
      StepDownBatch(64, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(0, 64), &for_burst), 2);
  EXPECT_FALSE(for_burst);
  // 25 ms of slack (5% of a 500-ms batch-latency limit): 4 x <4>, 39% more rows/s from a
  // backlog (at least kBurstReserveMinGain) for 5.6 ms of p99, at the smallest B that has it
  // (the lowest p99 of those).
  EXPECT_EQ(
      StepDownBatch(64, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(25, 64), &for_burst),
      4);
  EXPECT_TRUE(for_burst);
  // 5 ms: nothing but 2 x <8> is within it.
  EXPECT_EQ(
      StepDownBatch(64, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(5, 64), &for_burst), 2);
  EXPECT_FALSE(for_burst);
  // 40 ms: 8 x <2> (291 rows/s at 62 ms) is within it, and 4 x <4>'s 273 not within 95% of
  // that (kBatchForRateNearMost).
  EXPECT_EQ(
      StepDownBatch(64, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(40, 64), &for_burst),
      8);
  // Serving 4 x <4> (B = 16) and asked down to 2: the serving plan is within the slack and
  // absorbs the most, so it stays.
  EXPECT_EQ(
      StepDownBatch(16, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(25, 16), &for_burst),
      std::nullopt);
  EXPECT_TRUE(for_burst);
  EXPECT_EQ(
      StepDownBatch(16, 2, 2000, 0.8, calm, capacity, p99, InceptionReserve(0, 16), &for_burst), 2);
  EXPECT_FALSE(for_burst);
  // ... and where 8 x <2> is within the slack too: 7% more is not worth a switch
  // (kBurstReserveMinGain).
  EXPECT_EQ(
      StepDownBatch(16, 8, 2000, 0.8, calm, capacity, p99, InceptionReserve(40, 16), &for_burst),
      std::nullopt);
  EXPECT_TRUE(for_burst);
}

TEST(BatchForRateTest, StepDownSkipsBatchesWithoutAPlan) {
  const RateOverFn calm = [](int64_t) -> std::optional<double> { return 1.0; };
  // max_b-style sizes: from 48 the candidates are 3 (the estimate), 4, 8, 16, 32.
  std::vector<int64_t> asked;
  EXPECT_EQ(StepDownBatch(48, 3, 2000, 0.8, calm, Table({{16, 10}}, &asked), kNoRate), 16);
  EXPECT_EQ(asked, (std::vector<int64_t>{48, 3, 4, 8, 16, 32}));
}

TEST(BatchForRateTest, BacklogBatchGrowsWhileEachStepServesFivePercentMore) {
  // 1 -> 2 serves 7% more; 2 -> 4 only 2.5%: a backlog runs in batches of 2, not 64.
  EXPECT_EQ(BacklogBatch(1, 64, Table(kResNet)), 2);
  EXPECT_EQ(BacklogBatch(4, 64, Table(kResNet)), 8);    // 16.5 -> 18.6
  EXPECT_EQ(BacklogBatch(8, 64, Table(kResNet)), 8);    // 18.6 -> 18.9: 1.6%
  EXPECT_EQ(BacklogBatch(16, 64, Table(kResNet)), 16);  // never below B
  // Growing all the way: max_b.
  EXPECT_EQ(BacklogBatch(1, 8, Table({{1, 10}, {2, 12}, {4, 20}, {8, 30}})), 8);
  // A one-thread ResNet-50 instance profiled on 2 vCPUs: 16% more rows/s at b = 64 than at
  // b = 1, never 5% more from one power of two to the next.
  const std::map<int64_t, double> measured = {{1, 6.27},  {2, 6.27},  {4, 6.76}, {8, 6.59},
                                              {16, 7.06}, {32, 7.14}, {64, 7.26}};
  EXPECT_EQ(BacklogBatch(1, 64, Table(measured)), 1);
  std::vector<int64_t> asked;
  EXPECT_EQ(BacklogBatch(2, 64, Table(measured, &asked)), 4);  // 6.27 -> 6.76: 7.8%
  EXPECT_EQ(asked, (std::vector<int64_t>{2, 4, 8}));           // 8 serves less: B doubled ends it
}

// 23 two-thread Inception-v3 instances on 64 virtual CPUs (a hand-over stage): a power of two
// of rows covers them unevenly and serves less than B = 23 does; B doubled covers them evenly.
TEST(BatchForRateTest, BacklogBatchTriesBDoubledAndPassesOverUnevenCovers) {
  std::vector<int64_t> asked;
  const std::map<int64_t, double> stage = {{23, 641}, {32, 530},  {46, 762},  {64, 581},
                                           {92, 836}, {128, 600}, {184, 864}, {256, 600}};
  EXPECT_EQ(BacklogBatch(23, 1024, Table(stage, &asked)), 92);  // 184 serves 3% more
  EXPECT_EQ(asked, (std::vector<int64_t>{23, 32, 46, 64, 92, 128, 184}));
  // An uneven cover is passed over, not the end of the search, whether it serves less than B
  // or a little more: 64 rows serve 9% more than B, 46 19% more.
  EXPECT_EQ(BacklogBatch(23, 1024, Table({{23, 641}, {32, 530}, {64, 700}})), 64);
  EXPECT_EQ(BacklogBatch(23, 1024, Table({{23, 641}, {32, 660}, {46, 762}})), 46);
}

TEST(BatchForRateTest, BacklogBatchSkipsBatchesWithoutCapacity) {
  std::vector<int64_t> asked;
  EXPECT_EQ(BacklogBatch(2, 48, Table({}, &asked)), 2);
  EXPECT_EQ(asked, (std::vector<int64_t>{2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(BacklogBatch(1, 8, Table({{1, 10}, {4, 12}})), 4);
  // A B without a plan counts as serving nothing.
  EXPECT_EQ(BacklogBatch(3, 8, Table({{4, 10}, {8, 10.2}})), 4);
  EXPECT_EQ(BacklogBatch(1, 1, Table({{1, 10}})), 1);
  // No B yet (a set of no rows): the first size that gains too little ends the search.
  EXPECT_EQ(BacklogBatch(0, 8, Table({{1, 10}, {2, 10.1}, {4, 20}})), 1);
}

TEST(BatchForRateTest, ArrivalsExceedCapacityOnlyBeyondTwoSigmas) {
  // 2 s at a capacity of 7.3 rows/s: 14.6 expected, the bar is 14.6 + 2·√14.6 = 22.2 rows.
  EXPECT_FALSE(ArrivalsExceedCapacity(15, 2, 7.3));  // the rate (7.5/s) is above capacity
  EXPECT_FALSE(ArrivalsExceedCapacity(22, 2, 7.3));
  EXPECT_TRUE(ArrivalsExceedCapacity(23, 2, 7.3));
  // Longer windows find smaller excesses: 16 rows/s against 14, over 2 s and over 32 s.
  EXPECT_FALSE(ArrivalsExceedCapacity(32, 2, 14));
  EXPECT_TRUE(ArrivalsExceedCapacity(512, 32, 14));
  EXPECT_FALSE(ArrivalsExceedCapacity(0, 2, 0));
  EXPECT_TRUE(ArrivalsExceedCapacity(1, 2, 0));
}

TEST(BatchForRateTest, OverloadedRateTriesTheWindowThenTwiceAndFourTimesIt) {
  // 12.3 rows/s on a plan serving 12.4: never above full capacity,
  // but above 80% of it (9.9 rows/s) once 8 s of history tell the excess from chance: over 2 s
  // the bar is 19.8 + 2·√19.8 = 28.7 rows, over 8 s 79.4 + 17.8 = 97.2 (12.2 rows/s).
  std::vector<int64_t> asked;
  const RateOverFn steady = [&](int64_t ms) -> std::optional<double> {
    asked.push_back(ms);
    return 12.3;
  };
  EXPECT_EQ(OverloadedRate(2000, 12.4, steady), std::nullopt);
  EXPECT_EQ(asked, (std::vector<int64_t>{2000, 4000, 8000}));
  EXPECT_EQ(OverloadedRate(2000, 0.8 * 12.4, steady), 12.3);
  // A burst over the last 2 s is found at once; a history shorter than a window, never.
  const RateOverFn burst = [](int64_t ms) -> std::optional<double> {
    return ms == 2000 ? 20.0 : 11.0;
  };
  EXPECT_EQ(OverloadedRate(2000, 12.4, burst), 20.0);
  const RateOverFn young = [](int64_t ms) -> std::optional<double> {
    if (ms > 2000) return std::nullopt;
    return 12.3;
  };
  EXPECT_EQ(OverloadedRate(2000, 0.8 * 12.4, young), std::nullopt);
}

}  // namespace
}  // namespace packrat
