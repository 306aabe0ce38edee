#include "emulator/latency_truth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace packrat::emulator {
namespace {

TEST(LatencyTruthTest, ProfileErrorIsFixedPerPointAndWithinItsBound) {
  std::set<double> seen;
  for (int t : {1, 2, 4, 8}) {
    for (int b : {1, 2, 4, 8, 16}) {
      const double f = ProfileErrorFactor(7, t, b, 0.2);
      EXPECT_GE(f, 0.8);
      EXPECT_LE(f, 1.2);
      EXPECT_EQ(f, ProfileErrorFactor(7, t, b, 0.2));  // every runtime lasts the same truth
      seen.insert(f);
    }
  }
  EXPECT_EQ(seen.size(), 20u);  // each point its own factor
  EXPECT_NE(ProfileErrorFactor(7, 1, 1, 0.2), ProfileErrorFactor(8, 1, 1, 0.2));
  EXPECT_EQ(ProfileErrorFactor(7, 1, 1, 0), 1);
}

TEST(LatencyTruthTest, PerturbedProfileScalesEveryPointByItsFactor) {
  Profile profile;
  ASSERT_TRUE(profile.Add({1, 1, 10.0, 9.0, 11.0, 5}).ok());
  ASSERT_TRUE(profile.Add({2, 4, 20.0, std::nullopt, std::nullopt, std::nullopt}).ok());
  const Profile truth = PerturbedProfile(profile, 0.2, 3);
  ASSERT_EQ(truth.points().size(), 2u);
  const double f = ProfileErrorFactor(3, 1, 1, 0.2);
  EXPECT_DOUBLE_EQ(*truth.Latency(1, 1), 10.0 * f);
  EXPECT_DOUBLE_EQ(*truth.Find(1, 1)->latency_min_ms, 9.0 * f);
  EXPECT_DOUBLE_EQ(*truth.Find(1, 1)->latency_max_ms, 11.0 * f);
  EXPECT_DOUBLE_EQ(*truth.Latency(2, 4), 20.0 * ProfileErrorFactor(3, 2, 4, 0.2));
  EXPECT_EQ(PerturbedProfile(profile, 0, 3), profile);
}

TEST(LatencyTruthTest, JitterHasMeanOneAndTheAskedCoefficientOfVariation) {
  Jitter jitter(0.3, 11);
  double sum = 0, squares = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = jitter.Next();
    ASSERT_GT(x, 0);
    sum += x;
    squares += x * x;
  }
  const double mean = sum / n;
  const double cv = std::sqrt(squares / n - mean * mean) / mean;
  EXPECT_NEAR(mean, 1.0, 0.01);
  EXPECT_NEAR(cv, 0.3, 0.01);
  Jitter none(0, 11);
  EXPECT_EQ(none.Next(), 1.0);
}

}  // namespace
}  // namespace packrat::emulator
