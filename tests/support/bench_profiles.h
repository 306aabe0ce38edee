// The bench's measured 2-vCPU profiles (bench/results/peers/profiles, rounded), for unit tests
// that check a planning rule against a real model's latencies. Header-only; needs
// packrat_planning and GoogleTest.
#pragma once

#include <tuple>
#include <vector>

#include "agent/planning/profile.h"
#include "gtest/gtest.h"

namespace packrat::testing {

// ⟨threads, batch, latency ms⟩ points as a Profile; a point the profile refuses fails the test.
inline Profile ProfileOf(const std::vector<std::tuple<int, int, double>>& points) {
  Profile profile;
  for (const auto& [threads, batch, ms] : points) {
    ProfilePoint p;
    p.threads = threads;
    p.batch = batch;
    p.latency_ms = ms;
    EXPECT_TRUE(profile.Add(p).ok());
  }
  return profile;
}

// ResNet-50: two threads scale almost perfectly (82 ms a row against 159).
inline Profile TwoCoreResNet50Profile() {
  return ProfileOf({{1, 1, 159.4},
                    {1, 2, 319.1},
                    {1, 4, 591.8},
                    {1, 8, 1214.3},
                    {2, 1, 82.2},
                    {2, 2, 144.8},
                    {2, 4, 292.4},
                    {2, 8, 602.9}});
}

// Inception-v3: two threads run a row in 148 ms against 256 on one.
inline Profile TwoCoreInceptionV3Profile() {
  return ProfileOf({{1, 1, 256.3},
                    {1, 2, 551.3},
                    {1, 4, 1082.0},
                    {1, 8, 2041.4},
                    {2, 1, 148.1},
                    {2, 2, 300.4},
                    {2, 4, 571.5},
                    {2, 8, 1019.4}});
}

}  // namespace packrat::testing
