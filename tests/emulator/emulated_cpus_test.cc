// Emulated computations in real time on a real node state. Only lower bounds on durations:
// a busy machine may stretch them, never shorten them.
#include "emulator/emulated_cpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "shm/segment.h"

namespace packrat::emulator {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class EmulatedCpusTest : public ::testing::Test {
 protected:
  std::unique_ptr<EmulatedCpus> Join(EmulatedCpusOptions options = {}) {
    auto node = shm::VirtualCpus::Open(name_);
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    auto cpus = EmulatedCpus::Create(std::move(node).value(), options);
    EXPECT_TRUE(cpus.ok()) << cpus.status().ToString();
    return std::move(cpus).value();
  }

  const std::string name_ = shm::Segment::MakeName(getpid(), "emulated-cpus-test");
  std::unique_ptr<shm::VirtualCpus> node_ = shm::VirtualCpus::Create(name_, 4).value();
};

TEST_F(EmulatedCpusTest, AComputationLastsAtLeastItsWorkAndUnmarksItsCpus) {
  auto cpus = Join();
  const auto start = Clock::now();
  auto done = cpus->Compute(milliseconds(30), {1, 2}, [] { return true; });
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(*done);
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  EXPECT_EQ(node_->busy_cpus(), 0u);
}

// Two computations of 60 ms on one CPU: it does at most one unit of work per unit of time, so
// the later one ends at least 120 ms after the first began, however they overlap.
TEST_F(EmulatedCpusTest, TwoComputationsOnOneCpuTakeTheirSumTogether) {
  auto first = Join();
  auto second = Join();
  const auto start = Clock::now();
  std::thread other(
      [&] { EXPECT_TRUE(*second->Compute(milliseconds(60), {0}, [] { return true; })); });
  EXPECT_TRUE(*first->Compute(milliseconds(60), {0, 3}, [] { return true; }));
  other.join();
  EXPECT_GE(Clock::now() - start, milliseconds(120));
  EXPECT_EQ(node_->busy(0), 0u);
}

TEST_F(EmulatedCpusTest, AnAbandonedComputationUnmarksItsCpus) {
  auto cpus = Join();
  auto done = cpus->Compute(std::chrono::hours(1), {2}, [] { return false; });
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  EXPECT_EQ(node_->busy(2), 0u);
  EXPECT_EQ(cpus->Compute(milliseconds(1), {4}, [] { return true; }).status().code(),
            StatusCode::kInvalidArgument);
}

// At idle priority a computation is not counted busy (it slows no one) until its limit; from
// then on it is, as any other.
TEST_F(EmulatedCpusTest, AnIdlePriorityComputationIsCountedBusyOnlyAfterItsLimit) {
  EmulatedCpusOptions options;
  options.poll = milliseconds(5);  // keep_going sees the counts every 5 ms
  auto cpus = Join(options);
  const auto start = Clock::now();
  const auto idle_until = start + milliseconds(300);
  uint32_t busy_before = 0, busy_after = 0;
  bool seen_before = false, seen_after = false;
  auto done = cpus->Compute(
      milliseconds(600), {2},
      [&] {
        const uint32_t busy = node_->busy(2);
        if (Clock::now() < idle_until) {
          busy_before = std::max(busy_before, busy);
          seen_before = true;
        } else {
          busy_after = std::max(busy_after, busy);
          seen_after = true;
        }
        return true;
      },
      idle_until);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(*done);
  EXPECT_GE(Clock::now() - start, milliseconds(600));
  ASSERT_TRUE(seen_before && seen_after);
  EXPECT_EQ(busy_before, 0u);
  EXPECT_EQ(busy_after, 1u);
  EXPECT_EQ(node_->busy(2), 0u);
}

// An idle-priority computation on a CPU where another computes advances (almost) only once
// that one is done: 80 ms after 80 ms.
TEST_F(EmulatedCpusTest, AnIdlePriorityComputationWaitsForTheBusyCpu) {
  auto busy = Join();
  auto idle = Join();
  const auto start = Clock::now();
  std::thread other(
      [&] { EXPECT_TRUE(*busy->Compute(milliseconds(80), {0}, [] { return true; })); });
  while (node_->busy(0) == 0 && Clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::yield();  // until the other computation has marked CPU 0
  }
  ASSERT_EQ(node_->busy(0), 1u);
  EXPECT_TRUE(*idle->Compute(
      milliseconds(80), {0, 1}, [] { return true; }, Clock::now() + std::chrono::hours(1)));
  other.join();
  EXPECT_GE(Clock::now() - start, milliseconds(155));
}

TEST(EmulatedCpusNoNodeTest, WithoutANodeAComputationJustLastsItsWork) {
  auto cpus = EmulatedCpus::Create(nullptr, EmulatedCpusOptions{});
  ASSERT_TRUE(cpus.ok());
  EXPECT_DOUBLE_EQ((*cpus)->RateNow({0, 1}), 1.0);
  const auto start = Clock::now();
  EXPECT_TRUE(*(*cpus)->Compute(milliseconds(20), {0}, [] { return true; }));
  EXPECT_GE(Clock::now() - start, milliseconds(20));
}

}  // namespace
}  // namespace packrat::emulator
