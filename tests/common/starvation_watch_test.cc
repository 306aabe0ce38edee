#include "common/starvation_watch.h"

#include <gtest/gtest.h>

namespace packrat {
namespace {

using std::chrono::milliseconds;

TEST(StarvationWatchTest, AWindowWithLessThanTheShareIsStarved) {
  const SteadyTime t0{};
  StarvationWatch watch(t0, milliseconds(1000), 0.1);
  EXPECT_FALSE(watch.Starved(t0 + milliseconds(500), milliseconds(0)));  // window not over
  EXPECT_TRUE(watch.Starved(t0 + milliseconds(1000), milliseconds(99)));
  EXPECT_TRUE(watch.Starved(t0 + milliseconds(1100), milliseconds(900)));  // stays starved
}

TEST(StarvationWatchTest, EachWindowIsJudgedOnItsOwn) {
  const SteadyTime t0{};
  StarvationWatch watch(t0, milliseconds(1000), 0.1);
  // A busy first second does not cover a starved second one.
  EXPECT_FALSE(watch.Starved(t0 + milliseconds(1000), milliseconds(800)));
  EXPECT_FALSE(watch.Starved(t0 + milliseconds(1500), milliseconds(810)));
  EXPECT_FALSE(watch.Starved(t0 + milliseconds(2000), milliseconds(900)));  // 100 of 1000
  EXPECT_TRUE(watch.Starved(t0 + milliseconds(3200), milliseconds(950)));   // 50 of 1200
}

}  // namespace
}  // namespace packrat
