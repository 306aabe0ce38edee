#include "agent/planning/arrival_rate.h"

#include <chrono>
#include <cmath>

#include "gtest/gtest.h"

namespace packrat {
namespace {

using namespace std::chrono_literals;
using SteadyTime = ArrivalRate::SteadyTime;

const SteadyTime kT0 = SteadyTime{} + 1h;

TEST(ArrivalRateTest, NothingUntilTheSamplesCoverTheSpan) {
  ArrivalRate rate(10s);
  EXPECT_FALSE(rate.Over(1s));
  rate.Sample(kT0, 0);
  EXPECT_FALSE(rate.Over(1s));
  rate.Sample(kT0 + 500ms, 10);
  EXPECT_FALSE(rate.Over(1s));
  EXPECT_DOUBLE_EQ(*rate.Over(500ms), 20);
  rate.Sample(kT0 + 1s, 15);
  EXPECT_DOUBLE_EQ(*rate.Over(1s), 15);
  EXPECT_FALSE(rate.Over(0s));
}

TEST(ArrivalRateTest, SlopeOverTheNewestSamplesThatCoverTheSpan) {
  ArrivalRate rate(10s);
  // 10 rows/s for 5 s, then 40 rows/s for 2 s; samples every 100 ms.
  int64_t total = 0;
  SteadyTime t = kT0;
  for (int i = 0; i < 50; ++i, t += 100ms, total += 1) rate.Sample(t, total);
  for (int i = 0; i < 20; ++i, t += 100ms, total += 4) rate.Sample(t, total);
  rate.Sample(t, total);
  EXPECT_DOUBLE_EQ(*rate.Over(2s), 40);
  EXPECT_NEAR(*rate.Over(4s), (80 + 20) / 4.0, 1e-9);
}

TEST(ArrivalRateTest, AStepShowsOverTheShortestStretchBeyondNoise) {
  ArrivalRate rate(10s);
  // 2 rows/s for 5 s (one row every 500 ms), then 500 rows/s (50 per 100-ms sample) for 300 ms.
  int64_t total = 0;
  SteadyTime t = kT0;
  for (int i = 0; i <= 50; ++i, t += 100ms) rate.Sample(t, total += (i % 5 == 0 ? 1 : 0));
  EXPECT_FALSE(rate.Shift(2, 200ms, 1s, 3));  // steady: nothing beyond noise
  for (int i = 0; i < 2; ++i, t += 100ms) rate.Sample(t, total += 50);
  // 200 ms after the step the stretch since is one interval long after the step's own one:
  // too short to measure.
  EXPECT_FALSE(rate.Shift(2, 200ms, 1s, 3));
  rate.Sample(t, total += 50);
  t += 100ms;
  // Nearly the full rate, not the 1-s mean (about 150): 100 rows in 200 ms less one standard
  // deviation (10).
  EXPECT_DOUBLE_EQ(*rate.Shift(2, 200ms, 1s, 3), 450);
  // A fall shows the same way: from 500 rows/s, 300 ms at none.
  ArrivalRate fall(10s);
  total = 0;
  t = kT0;
  for (int i = 0; i <= 20; ++i, t += 100ms) fall.Sample(t, total += 50);
  EXPECT_FALSE(fall.Shift(500, 200ms, 1s, 3));
  for (int i = 0; i < 3; ++i, t += 100ms) fall.Sample(t, total);
  EXPECT_DOUBLE_EQ(*fall.Shift(500, 200ms, 1s, 3), 5);  // none, plus one row of doubt
}

TEST(ArrivalRateTest, ASmallStepShowsOnlyOverALongerStretch) {
  ArrivalRate rate(10s);
  // 100 rows/s, then 140: over 500 ms 70 rows against 50 is within 3σ (21.2); over 600 ms, 84
  // against 60 is not (3σ = 23.2).
  int64_t total = 0;
  SteadyTime t = kT0;
  for (int i = 0; i <= 50; ++i, t += 100ms) rate.Sample(t, total += 10);
  for (int i = 0; i < 20; ++i, t += 100ms) rate.Sample(t, total += 14);
  EXPECT_FALSE(rate.Shift(100, 200ms, 500ms, 3));
  // The 900 ms after the step's interval: 126 rows, less √126.
  EXPECT_NEAR(*rate.Shift(100, 200ms, 1s, 3), (126 - std::sqrt(126.0)) / 0.9, 1e-9);
}

TEST(ArrivalRateTest, PeakOverTheWindowsWithinTheSpan) {
  ArrivalRate rate(60s);
  EXPECT_FALSE(rate.PeakOver(1s, 10s));
  // 10 rows/s, then a burst of 30 rows/s for 2 s, then 10 rows/s for 20 s; samples every 100 ms.
  int64_t total = 0;
  SteadyTime t = kT0;
  auto run = [&](int samples, int rows_per_sample) {
    for (int i = 0; i < samples; ++i, t += 100ms, total += rows_per_sample) rate.Sample(t, total);
  };
  run(50, 1);
  run(20, 3);
  run(200, 1);
  rate.Sample(t, total);
  EXPECT_DOUBLE_EQ(*rate.PeakOver(2s, 30s), 30);   // the burst, 20 s ago
  EXPECT_DOUBLE_EQ(*rate.PeakOver(2s, 10s), 10);   // not within the last 10 s
  EXPECT_NEAR(*rate.PeakOver(4s, 30s), 20, 1e-9);  // a longer window dilutes it
  EXPECT_FALSE(rate.PeakOver(100s, 30s));
  // Stretches ending at least 25 s before the newest sample: only the quiet start.
  EXPECT_DOUBLE_EQ(*rate.PeakOver(2s, 30s, 25s), 10);
}

TEST(ArrivalRateTest, ForgetsBeyondTheHorizonAndOnRestart) {
  ArrivalRate rate(2s);
  for (int i = 0; i <= 100; ++i) rate.Sample(kT0 + i * 100ms, i * 3);
  EXPECT_DOUBLE_EQ(*rate.Over(2s), 30);
  EXPECT_FALSE(rate.Over(3s));  // beyond the horizon
  rate.Restart();
  EXPECT_FALSE(rate.Over(100ms));
  rate.Sample(kT0 + 20s, 500);
  rate.Sample(kT0 + 21s, 510);
  EXPECT_DOUBLE_EQ(*rate.Over(1s), 10);
}

TEST(ArrivalRateTest, IgnoresSamplesOutOfOrderOrCountingBackwards) {
  ArrivalRate rate(10s);
  rate.Sample(kT0, 100);
  rate.Sample(kT0, 200);      // same time
  rate.Sample(kT0 - 1s, 0);   // earlier
  rate.Sample(kT0 + 1s, 50);  // counter went backwards
  rate.Sample(kT0 + 2s, 120);
  EXPECT_DOUBLE_EQ(*rate.Over(2s), 10);
}

}  // namespace
}  // namespace packrat
