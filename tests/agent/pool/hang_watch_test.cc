#include "agent/pool/hang_watch.h"

#include <gtest/gtest.h>

namespace packrat {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
const HangWatch::Clock::time_point kT0{};

TEST(HangWatchTest, SilenceBeyondTheTimeoutIsOverdueAndReportsRestartTheClock) {
  HangWatch watch(seconds(60), seconds(300));
  watch.Reported(kT0);
  EXPECT_FALSE(watch.Overdue(kT0 + seconds(59)));
  ASSERT_TRUE(watch.Overdue(kT0 + seconds(60)));
  EXPECT_EQ(*watch.Overdue(kT0 + seconds(61)), milliseconds(61'000));
  watch.Reported(kT0 + seconds(61));  // a completion, or a top-up query of a staged model
  EXPECT_FALSE(watch.Overdue(kT0 + seconds(100)));
  watch.Started(kT0 + seconds(200));  // work for an idle runtime: silence counts from then
  EXPECT_FALSE(watch.Overdue(kT0 + seconds(259)));
  EXPECT_TRUE(watch.Overdue(kT0 + seconds(260)));
}

TEST(HangWatchTest, UntilTheFirstReportTheStartUpAllowanceCountsToo) {
  HangWatch watch(seconds(60), seconds(300));
  watch.Started(kT0);  // a cold replacement's first slice
  EXPECT_FALSE(watch.Overdue(kT0 + seconds(299)));
  EXPECT_TRUE(watch.Overdue(kT0 + seconds(300)));
  watch.Reported(kT0 + seconds(10));
  EXPECT_TRUE(watch.Overdue(kT0 + seconds(70)));
}

TEST(HangWatchTest, AZeroTimeoutNeverCallsARuntimeHung) {
  HangWatch watch(milliseconds(0), seconds(300));
  watch.Reported(kT0);
  EXPECT_FALSE(watch.Overdue(kT0 + std::chrono::hours(24)));
}

}  // namespace
}  // namespace packrat
