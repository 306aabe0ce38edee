// StartRuntimeProcess against a scripted launcher: the "runtime" is this test, which opens the
// segment the launch names and moves its state, so every start-up outcome is deterministic.
#include "agent/pool/runtime_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace packrat {
namespace {

class ScriptedLauncher : public ProcessLauncher {
 public:
  // Runs as the launched runtime, with the segment it was given already open.
  std::function<void(shm::Segment&)> on_launch;
  // What Wait answers, call by call (nullopt: still running); after the last, "exit 0".
  std::vector<std::optional<std::string>> waits;
  std::vector<int> signals;

  StatusOr<pid_t> Launch(const LaunchSpec& spec) override {
    EXPECT_GE(spec.args.size(), 2u);
    EXPECT_EQ(spec.args[0], "--segment");
    auto segment = shm::Segment::Open(spec.args[1]);
    EXPECT_TRUE(segment.ok()) << segment.status().ToString();
    if (segment.ok() && on_launch) on_launch(**segment);
    return pid_t{4242};
  }
  void Signal(pid_t pid, int signal) override {
    EXPECT_EQ(pid, 4242);
    signals.push_back(signal);
  }
  std::optional<std::string> Poll(pid_t) override { return std::nullopt; }
  std::optional<std::string> Wait(pid_t, std::chrono::milliseconds) override {
    if (next_wait_ < waits.size()) return waits[next_wait_++];
    return std::string("exit 0");
  }

 private:
  size_t next_wait_ = 0;
};

RuntimeProcessOptions Options() {
  RuntimeProcessOptions o;
  o.label = "test/0";
  o.segment_tag = "rptest";
  o.segment.slot_input_bytes = 4096;
  o.segment.slot_output_bytes = 4096;
  o.spec.path = "/nonexistent/packrat-runtime";
  return o;
}

TEST(StartRuntimeProcessTest, ReadyRuntimeHandsBackItsSegmentAndReport) {
  ScriptedLauncher launcher;
  launcher.on_launch = [](shm::Segment& s) {
    s.SetInfo("loaded in 1 ms");
    s.SetState(shm::RuntimeState::kReady);
  };
  auto started = StartRuntimeProcess(Options(), &launcher);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(started->pid, 4242);
  EXPECT_EQ(started->load_report, "loaded in 1 ms");
  EXPECT_TRUE(launcher.signals.empty());
}

TEST(StartRuntimeProcessTest, AFailedRuntimeThatExitsIsNotSignalled) {
  ScriptedLauncher launcher;
  launcher.on_launch = [](shm::Segment& s) { s.Fail("model.pt: no such file"); };
  auto started = StartRuntimeProcess(Options(), &launcher);
  EXPECT_EQ(started.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(started.status().message().find("model.pt: no such file"), std::string::npos)
      << started.status().ToString();
  EXPECT_TRUE(launcher.signals.empty());
}

TEST(StartRuntimeProcessTest, AFailedRuntimeThatHangsOnTheWayOutIsKilled) {
  ScriptedLauncher launcher;
  launcher.on_launch = [](shm::Segment& s) { s.Fail("bad model"); };
  launcher.waits = {std::nullopt};  // still running after the grace period
  auto started = StartRuntimeProcess(Options(), &launcher);
  EXPECT_EQ(started.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(launcher.signals, std::vector<int>{SIGKILL});
}

}  // namespace
}  // namespace packrat
