#include "agent/planning/arrival_rate.h"

#include <chrono>

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
