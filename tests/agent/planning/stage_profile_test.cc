#include "agent/planning/stage_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

// Per-sample time that follows the paper's four-parameter curve exactly.
double TrueG(double b) { return 3.0 + (10.0 - 3.0) / (1 + std::pow(b / 4.0, 1.5)); }

// Runs where stage i always takes share[i] of the batch time b·TrueG(b), `repeats` per size.
std::vector<StageProfile::Run> ExactRuns(int64_t max_batch, const std::vector<double>& share,
                                         int repeats = 1) {
  std::vector<StageProfile::Run> runs;
  for (int64_t b = 1; b <= max_batch; ++b) {
    for (int k = 0; k < repeats; ++k) {
      StageProfile::Run r;
      r.batch = b;
      for (double s : share) r.stage_ms.push_back(s * b * TrueG(static_cast<double>(b)));
      runs.push_back(r);
    }
  }
  return runs;
}

TEST(StageProfileTest, TablesFromExactRuns) {
  auto p = StageProfile::Create(ExactRuns(16, {0.1, 0.2, 0.3, 0.4}, 3));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->num_stages(), 4);
  EXPECT_EQ(p->max_batch(), 16);
  EXPECT_NEAR(p->BatchMs(8), 8 * TrueG(8), 1e-9);
  EXPECT_NEAR(p->StageMs(8, 2), 0.3 * 8 * TrueG(8), 1e-9);
  // r[p,q]: the share of stages 1..q, whatever the batch.
  EXPECT_DOUBLE_EQ(p->Ratio(5, 0), 0);
  EXPECT_NEAR(p->Ratio(5, 1), 0.1, 1e-12);
  EXPECT_NEAR(p->Ratio(5, 3), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(p->Ratio(5, 4), 1);
  // Batch sizes beyond the profile are clamped to it.
  EXPECT_NEAR(p->Ratio(100, 2), 0.3, 1e-12);
  EXPECT_NEAR(p->Fluctuation(3), 0, 1e-12);
  EXPECT_NEAR(p->MaxFluctuation(), 0, 1e-12);
}

TEST(StageProfileTest, FourParameterFitRecoversTheCurve) {
  auto p = StageProfile::Create(ExactRuns(32, {0.5, 0.5}));
  ASSERT_TRUE(p.ok());
  const StageProfile::Fit& fit = p->fit();
  EXPECT_LT(fit.rms_rel_error, 1e-4);
  for (double b : {1.0, 3.0, 8.0, 20.0, 32.0}) {
    EXPECT_NEAR(fit.PerSampleMs(b), TrueG(b), TrueG(b) * 1e-3) << "b=" << b;
  }
  // Predictions: rows through the first q stages, and through the rest.
  EXPECT_NEAR(p->PredictThroughMs(6, 1), 0.5 * 6 * TrueG(6), 0.01);
  EXPECT_NEAR(p->PredictRestMs(6, 1), 0.5 * 6 * TrueG(6), 0.01);
  EXPECT_NEAR(p->PredictRestMs(6, 0), 6 * TrueG(6), 0.02);
  EXPECT_DOUBLE_EQ(p->PredictThroughMs(0, 1), 0);
}

TEST(StageProfileTest, FitsNoisyAffineBatchTimes) {
  // A CPU-like profile: fixed overhead plus a per-row cost, with ±3% noise.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::vector<StageProfile::Run> runs;
  for (int64_t b = 1; b <= 16; ++b) {
    for (int k = 0; k < 5; ++k) {
      const double total = (12 + 40.0 * b) * noise(rng);
      runs.push_back({b, {0.3 * total, 0.7 * total}});
    }
  }
  auto p = StageProfile::Create(runs);
  ASSERT_TRUE(p.ok());
  EXPECT_LT(p->fit().rms_rel_error, 0.03);
  EXPECT_GT(p->MaxFluctuation(), 0.0);
  EXPECT_LT(p->MaxFluctuation(), 0.03);
  EXPECT_NEAR(p->fit().PerSampleMs(10) * 10, 412, 412 * 0.03);
}

TEST(StageProfileTest, OptimalBatchIsTheLargestWithinTheStrictBudget) {
  auto p = StageProfile::Create(ExactRuns(16, {1.0}));
  ASSERT_TRUE(p.ok());
  // b·g(b) grows with b: find the budget between two sizes.
  const double at6 = 6 * p->fit().PerSampleMs(6), at7 = 7 * p->fit().PerSampleMs(7);
  EXPECT_EQ(p->OptimalBatch((at6 + at7) / 2), 6);
  EXPECT_EQ(p->OptimalBatch(at7 + 0.01), 7);
  EXPECT_EQ(p->OptimalBatch(0.001), 1);  // never below one row
  EXPECT_EQ(p->OptimalBatch(1e9), 16);   // never beyond the profile
  EXPECT_DOUBLE_EQ(p->StrictBudgetMs(100), 100);
}

TEST(StageProfileTest, FluctuationTightensTheBudget) {
  // Batch 1 alternates 9 and 11 ms: mean 10, mean |dev|/mean = 0.1.
  std::vector<StageProfile::Run> runs = {{1, {9}}, {1, {11}}, {2, {20}}, {2, {20}}};
  auto p = StageProfile::Create(runs);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->Fluctuation(1), 0.1, 1e-12);
  EXPECT_NEAR(p->Fluctuation(2), 0.0, 1e-12);
  EXPECT_NEAR(p->MaxFluctuation(), 0.1, 1e-12);
  EXPECT_NEAR(p->StrictBudgetMs(110), 100, 1e-9);
}

TEST(StageProfileTest, RejectsBadRuns) {
  EXPECT_FALSE(StageProfile::Create({}).ok());
  EXPECT_FALSE(StageProfile::Create({{1, {}}}).ok());
  EXPECT_FALSE(StageProfile::Create({{0, {1}}}).ok());
  EXPECT_FALSE(StageProfile::Create({{1, {1, 2}}, {2, {1}}}).ok());  // stage counts differ
  EXPECT_FALSE(StageProfile::Create({{1, {-1}}}).ok());
  EXPECT_FALSE(StageProfile::Create({{1, {0}}}).ok());          // a batch takes some time
  const auto gap = StageProfile::Create({{1, {1}}, {3, {3}}});  // batch 2 missing
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("batch size 2"), std::string::npos);
}

TEST(StageProfileTest, CsvRoundTripAndErrors) {
  testing::TempDir dir;
  auto p = StageProfile::Create(ExactRuns(4, {0.25, 0.75}, 2));
  ASSERT_TRUE(p.ok());
  const std::string path = dir.path() + "/stages.csv";
  ASSERT_TRUE(p->WriteCsv(path).ok());
  auto back = StageProfile::LoadCsv(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->runs().size(), 8u);
  EXPECT_NEAR(back->BatchMs(3), p->BatchMs(3), 1e-4);
  EXPECT_NEAR(back->Ratio(3, 1), 0.25, 1e-5);

  EXPECT_EQ(StageProfile::LoadCsv(dir.path() + "/missing.csv").status().code(),
            StatusCode::kNotFound);
  const auto bad_header = StageProfile::ParseCsv("threads,x\n1,2\n", "x.csv");
  EXPECT_NE(bad_header.status().message().find("header"), std::string::npos);
  const auto bad_cell = StageProfile::ParseCsv("batch,stage_0_ms\n1,fast\n", "x.csv");
  EXPECT_NE(bad_cell.status().message().find("x.csv:2"), std::string::npos);
  const auto columns = StageProfile::ParseCsv("batch,stage_0_ms\n1,2,3\n", "x.csv");
  EXPECT_NE(columns.status().message().find("columns"), std::string::npos);
}

}  // namespace
}  // namespace packrat
