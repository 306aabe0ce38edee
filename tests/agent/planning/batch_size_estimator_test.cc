#include "agent/planning/batch_size_estimator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

namespace packrat {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Options = BatchSizeEstimator::Options;
using SteadyTime = BatchSizeEstimator::SteadyTime;

// A decision taken while replaying a trace: the index of the sample it followed and the new B.
struct Decision {
  int64_t sample;
  int64_t batch;
  bool operator==(const Decision&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Decision& d) {
  return os << "{sample " << d.sample << ", B " << d.batch << "}";
}

// Appends `count` copies of `depth` to `trace`.
void Repeat(std::vector<int64_t>& trace, int64_t depth, int count) {
  trace.insert(trace.end(), static_cast<size_t>(count), depth);
}

class BatchSizeEstimatorTest : public ::testing::Test {
 protected:
  // An arbitrary origin far from the clock's epoch.
  const SteadyTime t0_ = SteadyTime{} + std::chrono::hours(1);

  // Plays the owner's loop: sample i is taken at t0 + i · sample_period, then Decide() runs with
  // the current B, which a decision replaces (as the reconfiguration would).
  std::vector<Decision> Replay(BatchSizeEstimator& e, const std::vector<int64_t>& trace,
                               int64_t& current_b) {
    std::vector<Decision> decisions;
    for (size_t i = 0; i < trace.size(); ++i) {
      const SteadyTime now = t0_ + static_cast<int64_t>(i) * e.options().sample_period;
      EXPECT_TRUE(e.Sample(now, trace[i]));
      if (std::optional<int64_t> b = e.Decide(now, current_b)) {
        decisions.push_back({static_cast<int64_t>(i), *b});
        current_b = *b;
      }
    }
    return decisions;
  }

  // alpha = 1 makes the EWMA the last depth: the estimate of each sample is exact.
  static Options Instant(int64_t window) {
    Options o;
    o.alpha = 1.0;
    o.window = window;
    return o;
  }
};

TEST_F(BatchSizeEstimatorTest, DefaultsAreValidAndDocumented) {
  const Options o;
  EXPECT_TRUE(BatchSizeEstimator::Validate(o).ok());
  EXPECT_DOUBLE_EQ(o.alpha, 0.2);
  EXPECT_EQ(o.window, 50);
  EXPECT_EQ(o.sample_period, milliseconds(100));
  EXPECT_EQ(o.reconfiguration_timeout, seconds(10));
  EXPECT_EQ(o.min_batch, 1);
  EXPECT_EQ(o.max_batch, 1024);
  EXPECT_DOUBLE_EQ(o.keep_share, 0.1);
  // The window of a decision fits inside one timeout.
  EXPECT_LE(o.window * o.sample_period, o.reconfiguration_timeout);
}

TEST_F(BatchSizeEstimatorTest, ValidateRejectsBadOptions) {
  auto invalid = [](auto mutate) {
    Options o;
    mutate(o);
    const Status s = BatchSizeEstimator::Validate(o);
    EXPECT_FALSE(BatchSizeEstimator::Create(o).ok());
    return s.code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid([](Options& o) { o.alpha = 0.0; }));
  EXPECT_TRUE(invalid([](Options& o) { o.alpha = -0.1; }));
  EXPECT_TRUE(invalid([](Options& o) { o.alpha = 1.5; }));
  EXPECT_TRUE(invalid([](Options& o) { o.alpha = std::numeric_limits<double>::quiet_NaN(); }));
  EXPECT_TRUE(invalid([](Options& o) { o.window = 0; }));
  EXPECT_TRUE(invalid([](Options& o) { o.sample_period = milliseconds(0); }));
  EXPECT_TRUE(invalid([](Options& o) { o.reconfiguration_timeout = seconds(-1); }));
  EXPECT_TRUE(invalid([](Options& o) { o.keep_share = -0.5; }));
  EXPECT_TRUE(invalid([](Options& o) { o.keep_share = 1.0; }));
  EXPECT_TRUE(invalid([](Options& o) { o.min_batch = 0; }));
  EXPECT_TRUE(invalid([](Options& o) { o.min_batch = 3; }));
  EXPECT_TRUE(invalid([](Options& o) { o.max_batch = 1000; }));
  EXPECT_TRUE(invalid([](Options& o) {
    o.min_batch = 64;
    o.max_batch = 32;
  }));

  Options ok;
  ok.alpha = 1.0;
  ok.window = 1;
  ok.min_batch = 8;
  ok.max_batch = 8;
  ASSERT_TRUE(BatchSizeEstimator::Create(ok).ok());
  EXPECT_EQ(BatchSizeEstimator::Create(ok)->Estimate(), 8);
}

TEST_F(BatchSizeEstimatorTest, EwmaFollowsThePaperFormula) {
  Options o;
  o.alpha = 0.5;
  BatchSizeEstimator e(o);
  EXPECT_EQ(e.ewma(), 0.0);
  EXPECT_EQ(e.Estimate(), 1);  // min_batch before any sample
  ASSERT_TRUE(e.Sample(t0_, 10));
  EXPECT_DOUBLE_EQ(e.ewma(), 10.0);  // the first sample initialises the average
  ASSERT_TRUE(e.Sample(t0_ + milliseconds(100), 20));
  EXPECT_DOUBLE_EQ(e.ewma(), 15.0);
  ASSERT_TRUE(e.Sample(t0_ + milliseconds(200), 0));
  EXPECT_DOUBLE_EQ(e.ewma(), 7.5);
  ASSERT_TRUE(e.Sample(t0_ + milliseconds(300), -5));  // counts as 0
  EXPECT_DOUBLE_EQ(e.ewma(), 3.75);
  EXPECT_EQ(e.samples(), 4);
}

TEST_F(BatchSizeEstimatorTest, EstimateFloorsToPowerOfTwoAndClamps) {
  BatchSizeEstimator e(Instant(1));
  SteadyTime now = t0_;
  auto estimate_of = [&](int64_t depth) {
    now += milliseconds(100);
    EXPECT_TRUE(e.Sample(now, depth));
    return e.Estimate();
  };
  EXPECT_EQ(estimate_of(0), 1);
  EXPECT_EQ(estimate_of(1), 1);
  EXPECT_EQ(estimate_of(2), 2);
  EXPECT_EQ(estimate_of(3), 2);
  EXPECT_EQ(estimate_of(7), 4);
  EXPECT_EQ(estimate_of(31), 16);
  EXPECT_EQ(estimate_of(32), 32);
  EXPECT_EQ(estimate_of(63), 32);
  EXPECT_EQ(estimate_of(1000), 512);
  EXPECT_EQ(estimate_of(1024), 1024);
  EXPECT_EQ(estimate_of(1'000'000), 1024);  // max_batch

  Options bounded = Instant(1);
  bounded.min_batch = 4;
  bounded.max_batch = 16;
  BatchSizeEstimator b(bounded);
  ASSERT_TRUE(b.Sample(t0_, 1));
  EXPECT_EQ(b.Estimate(), 4);
  ASSERT_TRUE(b.Sample(t0_ + seconds(1), 100));
  EXPECT_EQ(b.Estimate(), 16);
}

TEST_F(BatchSizeEstimatorTest, EstimateRoundsTheAverageToWholeRequests) {
  Options o;
  o.alpha = 0.5;
  BatchSizeEstimator e(o);
  ASSERT_TRUE(e.Sample(t0_, 31));
  ASSERT_TRUE(e.Sample(t0_ + milliseconds(100), 32));
  EXPECT_DOUBLE_EQ(e.ewma(), 31.5);
  EXPECT_EQ(e.Estimate(), 32);
  ASSERT_TRUE(e.Sample(t0_ + milliseconds(200), 31));
  EXPECT_DOUBLE_EQ(e.ewma(), 31.25);
  EXPECT_EQ(e.Estimate(), 16);
}

TEST_F(BatchSizeEstimatorTest, DropsSamplesCloserThanThePeriod) {
  BatchSizeEstimator e(Instant(1));
  EXPECT_FALSE(e.next_sample_time().has_value());
  ASSERT_TRUE(e.Sample(t0_, 8));
  EXPECT_EQ(e.next_sample_time(), t0_ + milliseconds(100));
  EXPECT_FALSE(e.Sample(t0_ + milliseconds(99), 64));
  EXPECT_FALSE(e.Sample(t0_ - seconds(1), 64));  // time going backwards
  EXPECT_EQ(e.Estimate(), 8);
  EXPECT_EQ(e.samples(), 1);
  EXPECT_TRUE(e.Sample(t0_ + milliseconds(100), 64));
  EXPECT_EQ(e.Estimate(), 64);
  // The period counts from the last taken sample, not from a fixed grid.
  EXPECT_TRUE(e.Sample(t0_ + milliseconds(250), 16));
  EXPECT_FALSE(e.Sample(t0_ + milliseconds(300), 2));
  EXPECT_EQ(e.samples(), 3);
}

TEST_F(BatchSizeEstimatorTest, DecidesOnlyAtTimeoutBoundaries) {
  Options o = Instant(5);
  o.reconfiguration_timeout = seconds(1);
  BatchSizeEstimator e(o);
  EXPECT_FALSE(e.Decide(t0_ + seconds(5), 1).has_value());  // no sample yet
  EXPECT_FALSE(e.next_decision_time().has_value());
  for (int i = 0; i < 10; ++i) {
    const SteadyTime now = t0_ + i * milliseconds(100);
    ASSERT_TRUE(e.Sample(now, 8));
    if (i >= 5) {
      EXPECT_FALSE(e.Decide(now, 1).has_value()) << i;  // window full, but not yet timed out
    }
  }
  EXPECT_EQ(e.next_decision_time(), t0_ + seconds(1));
  EXPECT_FALSE(e.Decide(t0_ + milliseconds(999), 1).has_value());
  EXPECT_EQ(e.Decide(t0_ + seconds(1), 1), 8);
  EXPECT_EQ(e.next_decision_time(), t0_ + seconds(2));
  // Until the next boundary nothing is decided, even if the caller kept the old B.
  EXPECT_FALSE(e.Decide(t0_ + seconds(1), 1).has_value());
  EXPECT_FALSE(e.Decide(t0_ + milliseconds(1999), 1).has_value());
  EXPECT_EQ(e.Decide(t0_ + seconds(2), 1), 8);
  // A boundary with the same B triggers nothing but is consumed.
  EXPECT_FALSE(e.Decide(t0_ + seconds(3), 8).has_value());
  EXPECT_EQ(e.next_decision_time(), t0_ + seconds(4));
  // A late caller skips the missed boundaries: the next one is on the grid after `now`.
  EXPECT_EQ(e.Decide(t0_ + milliseconds(6500), 1), 8);
  EXPECT_EQ(e.next_decision_time(), t0_ + seconds(7));
}

TEST_F(BatchSizeEstimatorTest, NoDecisionUntilTheWindowIsFull) {
  Options o = Instant(50);
  o.reconfiguration_timeout = seconds(1);
  BatchSizeEstimator e(o);
  std::vector<int64_t> trace;
  Repeat(trace, 16, 60);
  int64_t b = 1;
  // Boundaries at samples 10..40 see fewer than 50 estimates; the one at sample 50 decides.
  EXPECT_EQ(Replay(e, trace, b), (std::vector<Decision>{{50, 16}}));
  EXPECT_EQ(e.Smoothed(1), 16);
}

TEST_F(BatchSizeEstimatorTest, ModeTiesPreferTheCurrentBatchThenTheSmaller) {
  BatchSizeEstimator e(Instant(4));
  const int64_t depths[] = {4, 8, 4, 8};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(e.Sample(t0_ + i * milliseconds(100), depths[i]));
  EXPECT_EQ(e.Smoothed(8), 8);
  EXPECT_EQ(e.Smoothed(4), 4);
  EXPECT_EQ(e.Smoothed(2), 4);
  EXPECT_EQ(e.Smoothed(16), 4);
  EXPECT_EQ(e.Smoothed(3), 4);  // not a power of two: never matches
  EXPECT_FALSE(e.Decide(t0_ + seconds(10), 8).has_value());
  EXPECT_EQ(e.Decide(t0_ + seconds(20), 16), 4);
  // The window slides: the oldest 4 leaves, 8 becomes the strict mode.
  ASSERT_TRUE(e.Sample(t0_ + seconds(21), 8));
  EXPECT_EQ(e.Smoothed(4), 8);
}

// Defaults: samples every 100 ms, decisions every 100 samples (10 s), window of 50.
TEST_F(BatchSizeEstimatorTest, StepUpRaisesBatchOnceAtTheNextBoundary) {
  BatchSizeEstimator e(Options{});
  std::vector<int64_t> trace;
  Repeat(trace, 1, 200);
  Repeat(trace, 32, 300);
  int64_t b = 1;
  // The boundary at sample 200 sees only the first step sample; at 300 the window is all 32.
  EXPECT_EQ(Replay(e, trace, b), (std::vector<Decision>{{300, 32}}));
  EXPECT_EQ(b, 32);
  EXPECT_EQ(e.Estimate(), 32);
  EXPECT_DOUBLE_EQ(std::round(e.ewma()), 32.0);
}

TEST_F(BatchSizeEstimatorTest, RestartForgetsTheLoadSeenBefore) {
  BatchSizeEstimator e(Options{});
  std::vector<int64_t> trace;
  Repeat(trace, 64, 90);  // e.g. single requests of 64 rows, under a plan set by hand
  int64_t b = 8;
  EXPECT_TRUE(Replay(e, trace, b).empty());
  e.Restart();
  EXPECT_EQ(e.samples(), 0);
  EXPECT_EQ(e.ewma(), 0.0);
  EXPECT_FALSE(e.next_decision_time().has_value());
  // Light load afterwards: the first decision, a full timeout after the first new sample, is
  // made from the new load only (without the restart it would have been 64 at sample 100).
  const SteadyTime later = t0_ + std::chrono::seconds(60);
  std::optional<int64_t> decided;
  int64_t decided_at = -1;
  for (int i = 0; i < 200 && !decided; ++i) {
    const SteadyTime now = later + i * e.options().sample_period;
    EXPECT_TRUE(e.Sample(now, 1));
    if ((decided = e.Decide(now, b))) decided_at = i;
  }
  EXPECT_EQ(decided, std::optional<int64_t>(1));
  EXPECT_EQ(decided_at, 100);
}

TEST_F(BatchSizeEstimatorTest, StepDownLowersBatchOnce) {
  BatchSizeEstimator e(Options{});
  std::vector<int64_t> trace;
  Repeat(trace, 64, 200);
  Repeat(trace, 8, 300);
  int64_t b = 64;
  EXPECT_EQ(Replay(e, trace, b), (std::vector<Decision>{{300, 8}}));
}

TEST_F(BatchSizeEstimatorTest, FollowsUpAndDownSteps) {
  BatchSizeEstimator e(Options{});
  std::vector<int64_t> trace;
  Repeat(trace, 8, 150);
  Repeat(trace, 64, 300);  // from sample 150
  Repeat(trace, 8, 300);   // from sample 450
  int64_t b = 8;
  EXPECT_EQ(Replay(e, trace, b), (std::vector<Decision>{{200, 64}, {500, 8}}));
}

TEST_F(BatchSizeEstimatorTest, NoiseAroundALevelNeverReconfigures) {
  // Depth uniform in [36, 60] around 48 for ten minutes: B stays 32 at every boundary.
  std::mt19937 rng(42);  // mt19937's sequence is fixed by the standard
  std::vector<int64_t> trace;
  for (int i = 0; i < 6000; ++i) trace.push_back(36 + static_cast<int64_t>(rng() % 25));
  BatchSizeEstimator e(Options{});
  int64_t b = 32;
  EXPECT_TRUE(Replay(e, trace, b).empty());
  EXPECT_EQ(b, 32);
}

// Depth 32 ± 4 for ten minutes: the EWMA dips below the 16/32 boundary about a quarter of the time.
std::vector<int64_t> NoisyBoundaryTrace(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> trace;
  for (int i = 0; i < 6000; ++i) trace.push_back(28 + static_cast<int64_t>(rng() % 9));
  return trace;
}

TEST_F(BatchSizeEstimatorTest, NoiseAcrossABoundaryDoesNotFlipFlop) {
  // 100 ten-minute traces; with keep_share 0.25 one of the first 20 would still swap once.
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    BatchSizeEstimator e(Options{});
    int64_t b = 32;
    EXPECT_EQ(Replay(e, NoisyBoundaryTrace(seed), b), std::vector<Decision>{}) << "seed " << seed;
  }
}

TEST_F(BatchSizeEstimatorTest, WithoutHysteresisTheBoundaryNoiseFlipFlops) {
  // The paper's plain mode (keep_share = 0) on the same kind of trace swaps 16 and 32.
  Options o;
  o.keep_share = 0.0;
  BatchSizeEstimator e(o);
  int64_t b = 32;
  const std::vector<Decision> decisions = Replay(e, NoisyBoundaryTrace(7), b);
  ASSERT_GE(decisions.size(), 2u);
  EXPECT_EQ(decisions[0].batch, 16);
  EXPECT_EQ(decisions[1].batch, 32);
}

TEST_F(BatchSizeEstimatorTest, HysteresisKeepsBatchWhileItHoldsItsShare) {
  Options o = Instant(4);
  o.keep_share = 0.25;  // one estimate in four keeps the current B
  BatchSizeEstimator e(o);
  const int64_t depths[] = {8, 4, 4, 4, 4};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(e.Sample(t0_ + i * milliseconds(100), depths[i]));
  EXPECT_EQ(e.Smoothed(8), 4);
  EXPECT_FALSE(e.Decide(t0_ + seconds(10), 8).has_value());
  ASSERT_TRUE(e.Sample(t0_ + seconds(11), depths[4]));  // the last 8 leaves the window
  EXPECT_EQ(e.Decide(t0_ + seconds(20), 8), 4);
}

TEST_F(BatchSizeEstimatorTest, SpikeShorterThanTheWindowIsIgnored) {
  // Level 8 with a 1 s burst to 256 that ends right at the decision boundary (sample 300) and a
  // second one that straddles the next boundary (sample 400).
  std::vector<int64_t> trace;
  Repeat(trace, 8, 290);
  Repeat(trace, 256, 10);
  Repeat(trace, 8, 95);
  Repeat(trace, 256, 10);
  Repeat(trace, 8, 195);
  BatchSizeEstimator e(Options{});
  int64_t b = 8;
  EXPECT_TRUE(Replay(e, trace, b).empty());
  EXPECT_EQ(b, 8);
}

}  // namespace
}  // namespace packrat
