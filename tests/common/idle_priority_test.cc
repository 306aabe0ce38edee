// Real scheduling policies of this process's threads. Moving a thread back from SCHED_IDLE
// needs CAP_SYS_NICE (root in CI); without it only the refusal is checked.
#include "common/idle_priority.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace packrat {
namespace {

TEST(IdlePriorityTest, AProcessComesBackWithAllItsThreads) {
  if (!MayLeaveIdlePriority()) {
    // The probe left this thread's policy alone.
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    GTEST_SKIP() << "no CAP_SYS_NICE: no idle starts here";
  }
  std::thread starting([] {
    ASSERT_TRUE(SetIdlePriority(0));
    // A thread it starts (libtorch's OpenMP pool, say) inherits the policy.
    std::mutex mu;
    std::condition_variable cv;
    pid_t pool_tid = 0;
    bool go = false;
    std::thread pool([&] {
      std::unique_lock<std::mutex> lock(mu);
      pool_tid = gettid();
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return pool_tid != 0; });
    }
    EXPECT_EQ(sched_getscheduler(pool_tid), SCHED_IDLE);
    EXPECT_TRUE(LeaveIdlePriority(getpid()).ok());
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    EXPECT_EQ(sched_getscheduler(pool_tid), SCHED_OTHER);
    {
      std::lock_guard<std::mutex> lock(mu);
      go = true;
    }
    cv.notify_all();
    pool.join();
  });
  starting.join();
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // the test's own thread never moved
}

TEST(IdlePriorityTest, ASampleCountsTheCpuTimeOfAllThreadsOfARunningProcess) {
  const std::optional<SchedSample> first = ReadSchedSample(getpid());
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->runnable);  // this thread is running while it reads
  // Two threads compute until the process has used 50 ms more (bounded by wall time).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto spin = [&] {
    volatile uint64_t x = 0;
    while (ReadSchedSample(getpid())->cpu - first->cpu < std::chrono::milliseconds(50) &&
           std::chrono::steady_clock::now() < give_up) {
      for (int i = 0; i < 100'000; ++i) x = x + i;
    }
  };
  std::thread other(spin);
  spin();
  other.join();
  EXPECT_GE(ReadSchedSample(getpid())->cpu - first->cpu, std::chrono::milliseconds(50));
  EXPECT_FALSE(ReadSchedSample(0x7ffffff0).has_value());  // no such process
}

}  // namespace
}  // namespace packrat
