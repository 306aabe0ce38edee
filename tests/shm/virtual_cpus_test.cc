// The virtual node's shared CPU state, on real shared memory and across real processes.
#include "shm/virtual_cpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "shm/segment.h"
#include "tests/shm/child_process.h"

namespace packrat::shm {
namespace {

class VirtualCpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = Segment::MakeName(getpid(), "vcpus-test." + std::to_string(counter_++));
    auto node = VirtualCpus::Create(name_, 8, 16);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
  }

  static inline int counter_ = 0;
  std::string name_;
  std::unique_ptr<VirtualCpus> node_;
};

TEST_F(VirtualCpusTest, CountsBusyThreadsPerCpuAcrossMappings) {
  auto other = VirtualCpus::Open(name_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ((*other)->num_cpus(), 8);
  auto a = node_->Claim(getpid());
  auto b = (*other)->Claim(getpid());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);

  const uint32_t g0 = node_->generation();
  ASSERT_TRUE(node_->Mark(*a, {0, 1}).ok());
  ASSERT_TRUE((*other)->Mark(*b, {1, 2, 3}).ok());
  EXPECT_EQ(node_->generation(), g0 + 2);
  EXPECT_EQ(node_->busy(0), 1u);
  EXPECT_EQ(node_->busy(1), 2u);
  EXPECT_EQ((*other)->busy(3), 1u);
  EXPECT_EQ(node_->busy(4), 0u);
  EXPECT_EQ(node_->busy_cpus(), 4u);
  EXPECT_EQ(node_->MaxBusy({0, 1}), 2u);
  EXPECT_EQ(node_->MaxBusy({2, 3}), 1u);
  EXPECT_GE(node_->changed_at().time_since_epoch().count(), 0);

  (*other)->Unmark(*b);
  EXPECT_EQ(node_->busy(1), 1u);
  EXPECT_EQ(node_->busy_cpus(), 2u);
  node_->Release(*a);
  EXPECT_EQ(node_->busy(0), 0u);
  EXPECT_EQ(node_->busy_cpus(), 0u);
  EXPECT_EQ(node_->generation(), g0 + 4);
}

TEST_F(VirtualCpusTest, RefusesCpusOutsideTheNodeAndADoubleMark) {
  auto h = node_->Claim(getpid());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(node_->Mark(*h, {8}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node_->busy_cpus(), 0u);
  ASSERT_TRUE(node_->Mark(*h, {7}).ok());
  EXPECT_EQ(node_->Mark(*h, {6}).code(), StatusCode::kFailedPrecondition);
  node_->Unmark(*h);
  node_->Unmark(*h);  // nothing marked: no change
  EXPECT_EQ(node_->busy(7), 0u);
  EXPECT_EQ(VirtualCpus::Create(name_ + ".x", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(VirtualCpus::Open(name_ + ".absent").status().code(), StatusCode::kNotFound);
}

TEST_F(VirtualCpusTest, HolderSlotsRunOut) {
  std::vector<int> held;
  for (int i = 0; i < 16; ++i) {
    auto h = node_->Claim(getpid());
    ASSERT_TRUE(h.ok());
    held.push_back(*h);
  }
  EXPECT_EQ(node_->Claim(getpid()).status().code(), StatusCode::kResourceExhausted);
  node_->Release(held.back());
  EXPECT_TRUE(node_->Claim(getpid()).ok());
}

// A runtime killed mid-slice leaves its CPUs counted; the next claim takes them back.
TEST_F(VirtualCpusTest, ReapsTheCountsOfAProcessThatDied) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto node = VirtualCpus::Open(name_);
    if (!node.ok()) _exit(2);
    auto h = (*node)->Claim(getpid());
    if (!h.ok() || !(*node)->Mark(*h, {2, 3}).ok()) _exit(3);
    _exit(0);  // dies with CPUs 2 and 3 counted busy
  }
  int status = 0;
  ASSERT_TRUE(ReapChild(child, &status));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(node_->busy(2), 1u);
  EXPECT_EQ(node_->busy_cpus(), 2u);
  const uint32_t before = node_->generation();
  EXPECT_EQ(node_->ReapDead(), 1);
  EXPECT_EQ(node_->busy(2), 0u);
  EXPECT_EQ(node_->busy(3), 0u);
  EXPECT_EQ(node_->busy_cpus(), 0u);
  EXPECT_NE(node_->generation(), before);  // computations on those CPUs speed up now
  EXPECT_EQ(node_->ReapDead(), 0);
}

TEST_F(VirtualCpusTest, AWaiterWakesWhenTheCountsChange) {
  auto h = node_->Claim(getpid());
  ASSERT_TRUE(h.ok());
  const uint32_t seen = node_->generation();
  std::thread waiter([&] {
    // Returns at the change; the test fails on its timeout only if the wake-up is lost.
    const auto start = std::chrono::steady_clock::now();
    while (node_->generation() == seen &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      node_->WaitForChange(seen, std::chrono::seconds(60));
    }
  });
  ASSERT_TRUE(node_->Mark(*h, {5}).ok());
  waiter.join();
  EXPECT_NE(node_->generation(), seen);
}

// A change rings the doorbells of the computing holders it may slow or speed up: those on the
// changed CPUs, and those that watch every CPU (neighbour slowdown); no one else is woken.
TEST_F(VirtualCpusTest, AChangeRingsOnlyTheHoldersItConcerns) {
  const int on_0 = *node_->Claim(getpid()), on_1 = *node_->Claim(getpid());
  const int all = *node_->Claim(getpid()), idle = *node_->Claim(getpid());
  const int changer = *node_->Claim(getpid());
  node_->WatchAll(all, true);
  ASSERT_TRUE(node_->Mark(on_0, {0, 4}).ok());
  ASSERT_TRUE(node_->Mark(on_1, {1}).ok());
  ASSERT_TRUE(node_->Mark(all, {6}).ok());
  const uint32_t b0 = node_->doorbell(on_0), b1 = node_->doorbell(on_1);
  const uint32_t ba = node_->doorbell(all), bi = node_->doorbell(idle);
  ASSERT_TRUE(node_->Mark(changer, {4, 5}).ok());
  EXPECT_EQ(node_->doorbell(on_0), b0 + 1);  // CPU 4 is its
  EXPECT_EQ(node_->doorbell(on_1), b1);
  EXPECT_EQ(node_->doorbell(all), ba + 1);
  EXPECT_EQ(node_->doorbell(idle), bi);  // not computing
  EXPECT_EQ(node_->rung_at(on_0), node_->changed_at());
  node_->Unmark(changer);
  EXPECT_EQ(node_->doorbell(on_0), b0 + 2);
  EXPECT_EQ(node_->doorbell(on_1), b1);
  // A waiter on its doorbell returns once rung (without the ring, after its timeout).
  const uint32_t seen = node_->doorbell(on_1);
  std::thread waiter([&] {
    while (node_->doorbell(on_1) == seen)
      node_->WaitForDoorbell(on_1, seen, std::chrono::seconds(60));
  });
  ASSERT_TRUE(node_->Mark(changer, {1}).ok());
  waiter.join();
  EXPECT_EQ(node_->doorbell(on_1), seen + 1);
}

}  // namespace
}  // namespace packrat::shm
