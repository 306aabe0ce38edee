#include "runtime/runtime_lifecycle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "shm/layout.h"

namespace packrat::runtime {
namespace {

class RuntimeLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    name_ = shm::Segment::MakeName(getpid(), std::string("lifecycle.") + info->name());
    (void)shm::Segment::Remove(name_);  // left over from a crashed run
    auto created = shm::Segment::Create(name_, shm::SegmentOptions{});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    agent_side_ = std::move(created).value();
  }
  void TearDown() override { (void)shm::Segment::Remove(name_); }

  std::string name_;
  std::unique_ptr<shm::Segment> agent_side_;
};

TEST_F(RuntimeLifecycleTest, AttachesToTheSegmentOfItsParentAgent) {
  auto attached = AttachToAgent(name_, getppid());
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  EXPECT_EQ((*attached)->state(), shm::RuntimeState::kStarting);
  EXPECT_TRUE(AttachToAgent(name_, /*agent_pid=*/0).ok());  // no agent to check
}

TEST_F(RuntimeLifecycleTest, RefusesWhenTheAgentIsNoLongerItsParent) {
  // This process's own pid is never its parent's.
  EXPECT_EQ(AttachToAgent(name_, getpid()).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(AttachToAgent("packrat.no-such-segment", 0).status().code(), StatusCode::kNotFound);
}

TEST_F(RuntimeLifecycleTest, AFailedStartIsRecordedForTheAgent) {
  auto runtime_side = AttachToAgent(name_, 0);
  ASSERT_TRUE(runtime_side.ok());
  EXPECT_EQ(FailStart(runtime_side->get(), InvalidArgument("no such model file")), 1);
  EXPECT_EQ(agent_side_->state(), shm::RuntimeState::kFailed);
  EXPECT_NE(agent_side_->ErrorText().find("no such model file"), std::string::npos);
}

TEST_F(RuntimeLifecycleTest, ServesBetweenReadyAndStopped) {
  auto runtime_side = AttachToAgent(name_, 0);
  ASSERT_TRUE(runtime_side.ok());
  shm::RuntimeState while_serving = shm::RuntimeState::kStarting;
  pid_t pid_while_serving = 0;
  const int code = ServeUntilStopped(runtime_side->get(), [&] {
    while_serving = agent_side_->state();
    pid_while_serving = agent_side_->header()->runtime_pid.load();
    return Unavailable("the agent exited");  // an error still ends in an orderly stop
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(while_serving, shm::RuntimeState::kReady);
  EXPECT_EQ(pid_while_serving, getpid());
  EXPECT_EQ(agent_side_->state(), shm::RuntimeState::kStopped);
}

}  // namespace
}  // namespace packrat::runtime
