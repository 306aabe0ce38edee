#include "agent/model/profiling_progress.h"

#include "gtest/gtest.h"

namespace packrat {
namespace {

using std::chrono::seconds;

TEST(ProfilingProgressTest, StatusCountsTheEtaDownBetweenPoints) {
  FakeClock clock;
  auto created = metrics::AgentMetrics::Create(metrics::AgentMetricsOptions{.proc_root = ""});
  ASSERT_TRUE(created.ok());
  metrics::ModelMetrics& m = (*created)->ForModel("demo");
  ProfilingProgress progress("demo", &m, &clock);
  EXPECT_EQ(progress.Status(), "");  // the first point is still running
  ProfileProgress p;
  p.done = 3;
  p.total = 12;
  p.eta_s = 250;
  progress.Update(p);
  EXPECT_EQ(progress.Status(), "profiling 3/12 points, ETA 4m10s");
  EXPECT_DOUBLE_EQ(m.profile_progress().Value(), 0.25);
  clock.Advance(seconds(30));
  EXPECT_EQ(progress.Status(), "profiling 3/12 points, ETA 3m40s");
  clock.Advance(seconds(600));
  EXPECT_EQ(progress.Status(), "profiling 3/12 points, ETA 0s");
  progress.Finish(/*complete=*/true);
  EXPECT_EQ(progress.Status(), "");
  EXPECT_DOUBLE_EQ(m.profile_progress().Value(), 1);
}

TEST(ProfilingProgressTest, TheLoggerFollowsItsClockAndStopsAtFinish) {
  FakeClock clock;
  ProfilingProgress progress("demo", nullptr, &clock, seconds(10));
  ASSERT_TRUE(clock.AwaitSleeps(1));
  clock.Advance(seconds(10));  // a log interval passes: it wakes, (has nothing yet,) sleeps again
  ASSERT_TRUE(clock.AwaitSleeps(2));
  progress.Finish();  // joins the thread: returns only once it stopped
  EXPECT_EQ(progress.Status(), "");
}

TEST(ProfilingProgressTest, DurationsReadLikeAClock) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(250), "4m10s");
  EXPECT_EQ(FormatDuration(3780), "1h03m");
  EXPECT_EQ(FormatDuration(-5), "0s");
}

}  // namespace
}  // namespace packrat
