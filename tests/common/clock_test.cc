#include "common/clock.h"

#include <thread>

#include "gtest/gtest.h"

namespace packrat {
namespace {

using std::chrono::milliseconds;

TEST(FakeClockTest, StandsStillUntilMoved) {
  FakeClock clock;
  const SteadyTime start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(milliseconds(250));
  EXPECT_EQ(clock.Now(), start + milliseconds(250));
  clock.Set(start);  // never backwards
  EXPECT_EQ(clock.Now(), start + milliseconds(250));
  clock.Set(start + milliseconds(300));
  EXPECT_EQ(clock.Now(), start + milliseconds(300));
}

TEST(FakeClockTest, AWaitPastItsDeadlineReturnsAtOnce) {
  FakeClock clock;
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  EXPECT_FALSE(clock.WaitUntil(&cv, &mu, clock.Now()));
  EXPECT_EQ(clock.sleeps(), 0u);
}

TEST(FakeClockTest, AdvancingToTheDeadlineWakesTheSleeper) {
  FakeClock clock;
  Mutex mu;
  CondVar cv;
  const SteadyTime deadline = clock.Now() + milliseconds(100);
  bool woke_in_time = true;
  std::thread sleeper([&] {
    MutexLock lock(&mu);
    // Until the fake time reaches the deadline (spurious wake-ups loop).
    while (clock.WaitUntil(&cv, &mu, deadline)) {
    }
    woke_in_time = clock.Now() >= deadline;
  });
  ASSERT_TRUE(clock.AwaitSleeps(1));
  clock.Advance(milliseconds(40));  // not yet: it sleeps again
  ASSERT_TRUE(clock.AwaitSleeps(2));
  clock.Advance(milliseconds(60));
  sleeper.join();
  EXPECT_TRUE(woke_in_time);
}

TEST(FakeClockTest, ANotificationWakesTheSleeperBeforeItsDeadline) {
  FakeClock clock;
  Mutex mu;
  CondVar cv;
  bool ready = false;
  bool before_deadline = false;
  std::thread sleeper([&] {
    MutexLock lock(&mu);
    while (!ready) {
      if (!clock.WaitUntil(&cv, &mu, clock.Now() + std::chrono::hours(1))) return;
    }
    before_deadline = true;
  });
  ASSERT_TRUE(clock.AwaitSleeps(1));
  {
    MutexLock lock(&mu);
    ready = true;
  }
  cv.NotifyAll();
  sleeper.join();
  EXPECT_TRUE(before_deadline);
}

TEST(RealClockTest, MovesForwardAndTimesOut) {
  Clock* clock = Clock::Real();
  const SteadyTime start = clock->Now();
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  while (clock->WaitUntil(&cv, &mu, start + milliseconds(5))) {
  }
  EXPECT_GE(clock->Now(), start + milliseconds(5));
}

}  // namespace
}  // namespace packrat
