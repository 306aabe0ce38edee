// The control loop against a fake instance-set switcher and a fake clock: what it samples and
// when, how it carries out the autoscaler's moves, management changes and restarts. (The
// policy's rules themselves: tests/agent/planning/autoscaler_test.cc.)
#include "agent/model/model_controller.h"

#include <atomic>
#include <functional>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace packrat {
namespace {

using std::chrono::milliseconds;

// Serves whatever it is told; records every switch and every wait for the sets it replaced.
class FakeSwitcher final : public SetSwitcher {
 public:
  struct Call {
    std::vector<InstanceGroup> groups;
    std::string reason;
    bool restart;
    int waits_before;  // WaitRetired calls before this switch
  };

  void Serve(std::vector<InstanceGroup> groups, std::optional<Plan> plan = std::nullopt) {
    auto set = std::make_shared<InstanceSet>();
    set->target_rows = TargetRows(groups);
    set->groups = std::move(groups);
    set->plan = std::move(plan);
    MutexLock lock(&mu_);
    active_ = std::move(set);
  }

  std::shared_ptr<InstanceSet> active() const override {
    MutexLock lock(&mu_);
    return active_;
  }
  bool ActiveHasDeadRuntime() const override { return dead_.load(); }
  std::vector<int> LiveParkedThreads() const override { return {}; }
  StartTimes start_times() const override { return {}; }
  // The model's CPUs less those its serving runtimes use; -1 (untracked) unless cpus_ is set.
  int FreeCpus() const override {
    if (cpus_.load() < 0) return -1;
    int used = 0;
    if (const auto set = active()) {
      for (const InstanceGroup& g : set->groups) used += g.count * g.threads;
    }
    return cpus_.load() - used;
  }
  std::vector<int> KeepableThreads() const override {
    {
      MutexLock lock(&mu_);
      if (keepable_) {
        std::vector<int> kept = *keepable_;
        keepable_.reset();  // once: the next set is all kept
        return kept;
      }
    }
    std::vector<int> threads;
    if (const auto set = active()) {
      for (const InstanceGroup& g : set->groups) threads.insert(threads.end(), g.count, g.threads);
    }
    return threads;
  }
  Status Switch(const std::vector<InstanceGroup>& groups, const std::optional<Plan>& plan,
                const std::string& reason, bool restart) override {
    {
      MutexLock lock(&mu_);
      calls_.push_back({groups, reason, restart, waits_.load()});
    }
    if (on_switch) on_switch();
    if (fail_.load()) return Unavailable("no room");
    Serve(groups, plan);
    return Status::Ok();
  }
  void WaitRetired() const override { ++waits_; }

  // The next KeepableThreads() answers `threads` (runtimes outside a smaller share).
  void KeepableOnce(std::vector<int> threads) {
    MutexLock lock(&mu_);
    keepable_ = std::move(threads);
  }

  std::vector<Call> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }

  std::atomic<bool> dead_{false};
  std::atomic<bool> fail_{false};
  std::atomic<int> cpus_{-1};
  mutable std::atomic<int> waits_{0};  // WaitRetired calls
  std::function<void()> on_switch;     // run by every Switch, on its caller's thread

 private:
  mutable Mutex mu_;
  // The next KeepableThreads() answer, where set (runtimes outside a smaller share); then every
  // serving runtime again.
  mutable std::optional<std::vector<int>> keepable_ GUARDED_BY(mu_);
  std::shared_ptr<InstanceSet> active_ GUARDED_BY(mu_);
  std::vector<Call> calls_ GUARDED_BY(mu_);
};

// One thread: 10, 10, 13.3 and 20 rows/s at b = 1, 2, 4, 8.
Profile SlowProfile() {
  Profile p;
  const double ms[] = {100, 200, 300, 400};
  int i = 0;
  for (int b = 1; b <= 8; b *= 2) {
    ProfilePoint point;
    point.threads = 1;
    point.batch = b;
    point.latency_ms = ms[i++];
    EXPECT_TRUE(p.Add(point).ok());
  }
  return p;
}

class ModelControllerTest : public ::testing::Test {
 protected:
  // A controller of a model on SlowProfile (or none: a static plan) with 10-ms samples, a
  // decision every second and a 200-ms overload window.
  void Make(bool with_profile, Profile profile = SlowProfile(), int threads = 1) {
    if (with_profile) optimizer_ = std::make_unique<Optimizer>(std::move(profile));
    AutoscalerOptions a;
    a.threads = threads;
    a.max_batch = 8;
    a.resizable_runtimes = true;
    a.window = 100;
    a.sample_period_ms = 10;
    a.overload_window_ms = 200;
    a.scale_down_delay_ms = scale_down_delay_ms_;
    BatchSizeEstimator::Options e;
    e.window = 100;
    e.sample_period = milliseconds(10);
    e.reconfiguration_timeout = milliseconds(1000);
    e.max_batch = 8;
    ModelControllerOptions o;
    o.model_name = std::string(1, 'm');  // "m" (GCC 12 reports a false -Wrestrict here)
    o.clock = &clock_;
    o.sets = &sets_;
    o.restart_backoff = milliseconds(5000);
    o.adaptive = with_profile;
    o.rows_in_system = [this] {
      ++samples_;
      return in_system_.load();
    };
    o.rows_arrived = [this] { return arrived_.load(); };
    o.serving = [this] { return serving_.load(); };
    controller_ = std::make_unique<ModelController>(
        o, Autoscaler(a, optimizer_.get()), LoadTracker(e, milliseconds(10'000)), optimizer_.get());
  }

  // Ticks every 10 ms from now, for at most `ticks` ticks, until `switches` switches have been
  // asked for; at tick i, 1 row arrives where i % period < burst (burst / period of 100 rows/s).
  void TickUntil(size_t switches, int ticks, int period, int burst) {
    SteadyTime now = clock_.Now();
    for (int i = 0; i < ticks && sets_.calls().size() < switches; ++i) {
      now += milliseconds(10);
      arrived_ += i % period < burst ? 1 : 0;
      controller_->Tick(now);
    }
  }

  int64_t scale_down_delay_ms_ = 30'000;
  FakeClock clock_;
  FakeSwitcher sets_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ModelController> controller_;
  std::atomic<int64_t> in_system_{0};
  std::atomic<int64_t> arrived_{0};
  std::atomic<int> samples_{0};
  std::atomic<bool> serving_{true};
};

TEST_F(ModelControllerTest, TheLoopSamplesOncePerSamplePeriodOfItsClock) {
  Make(false);
  sets_.Serve({{1, 1, 1}});
  controller_->Start();
  ASSERT_TRUE(clock_.AwaitSleeps(1));  // the first sample, then asleep until 10 ms later
  EXPECT_EQ(samples_.load(), 1);
  clock_.Advance(milliseconds(5));
  ASSERT_TRUE(clock_.AwaitSleeps(2));  // woken early: not due, asleep again
  EXPECT_EQ(samples_.load(), 1);
  clock_.Advance(milliseconds(5));
  ASSERT_TRUE(clock_.AwaitSleeps(3));
  EXPECT_EQ(samples_.load(), 2);
  controller_->Stop();
}

// The node partition plans a model for no less than its recent peak: a second at 100 rows/s
// stays its peak for scale_down_delay_ms after the arrivals stop, while its rate falls.
TEST_F(ModelControllerTest, TheSnapshotHoldsTheRecentPeakForTheScaleDownDelay) {
  scale_down_delay_ms_ = 2000;
  Make(false);
  sets_.Serve({{1, 1, 1}});
  EXPECT_FALSE(controller_->Snapshot().recent_peak.has_value());
  SteadyTime now = clock_.Now();
  const auto run = [&](int ticks, int rows_per_tick) {
    for (int i = 0; i < ticks; ++i) {
      now += milliseconds(10);
      arrived_ += rows_per_tick;
      controller_->Tick(now);
    }
  };
  run(100, 1);  // 1 s at 100 rows/s
  run(150, 0);  // 1.5 s idle
  ControllerSnapshot s = controller_->Snapshot();
  ASSERT_TRUE(s.recent_peak.has_value());
  EXPECT_NEAR(*s.recent_peak, 100, 5);
  EXPECT_LT(s.rate, 50);  // its 5-s mean: the arrivals are no longer at the peak
  run(100, 0);            // 2.5 s after the last row, no stretch within the span holds one
  s = controller_->Snapshot();
  ASSERT_TRUE(s.recent_peak.has_value());
  EXPECT_EQ(*s.recent_peak, 0);
}

TEST_F(ModelControllerTest, AnOverloadMoveIsCarriedOutAndReported) {
  Make(true);
  sets_.Serve({{1, 1, 1}}, *optimizer_->Solve(1, 1));
  in_system_ = 6;
  TickUntil(1, 200, 10, 3);  // 30 rows/s
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].groups, (std::vector<InstanceGroup>{{1, 1, 8}}));
  EXPECT_FALSE(calls[0].restart);
  EXPECT_NE(calls[0].reason.find("overloaded"), std::string::npos) << calls[0].reason;
  const ControllerSnapshot s = controller_->Snapshot();
  ASSERT_EQ(s.moves.size(), 1u);
  EXPECT_EQ(s.moves[0].reason.rule, Rule::kOverload);
  EXPECT_EQ(s.moves[0].reason.to_batch, 8);
  EXPECT_EQ(s.moves[0].state, MoveRecord::State::kServing);
  EXPECT_GT(s.ewma, 1);
  // The move restarted the autoscaler's arrivals; the peak a share must respect is still the
  // burst's.
  TickUntil(2, 10, 10, 0);
  const std::optional<double> peak = controller_->Snapshot().recent_peak;
  ASSERT_TRUE(peak.has_value());
  EXPECT_NEAR(*peak, 30, 10);
}

// One thread: 300 ms + 100 ms a row; four threads: 50 ms a row.
Profile FourThreadsWin() {
  Profile p;
  for (int t : {1, 4}) {
    for (int b = 1; b <= 8; b *= 2) {
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = t == 1 ? 300.0 + 100.0 * b : 50.0 * b;
      EXPECT_TRUE(p.Add(point).ok());
    }
  }
  return p;
}

TEST_F(ModelControllerTest, AGrowthThatCannotKeepItsRuntimesMigratesOnFreeCpus) {
  Make(true, FourThreadsWin(), 4);
  // Four one-thread runtimes on a 4-CPU share; the partition gives 8 CPUs and 2×⟨4,4⟩.
  sets_.Serve({{4, 1, 2}}, *optimizer_->Solve(4, 8));
  sets_.cpus_ = 8;
  ResizeRequest r;
  r.threads = 8;
  r.plan = *optimizer_->Solve(8, 8);
  ASSERT_EQ(r.plan->groups, (std::vector<InstanceGroup>{{2, 4, 4}}));
  ASSERT_TRUE(controller_->Resize(r).ok());
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_EQ(calls.size(), 2u);
  // Stage 1: one four-thread runtime on the 4 free CPUs; the one-thread runtimes, slower than
  // it together, go.
  EXPECT_EQ(calls[0].groups, (std::vector<InstanceGroup>{{1, 4, 8}}));
  EXPECT_NE(calls[0].reason.find("stage 1"), std::string::npos) << calls[0].reason;
  // Then the plan itself, keeping that runtime: the second starts on the CPUs freed.
  EXPECT_EQ(calls[1].groups, (std::vector<InstanceGroup>{{2, 4, 4}}));
  EXPECT_NE(calls[1].reason.find("keeping the serving runtimes"), std::string::npos)
      << calls[1].reason;
  // A stage's drain frees the CPUs the next stage starts on, and is waited for; the last set's
  // is not: the growth is done for the partition once that set serves.
  EXPECT_EQ(calls[0].waits_before, 0);
  EXPECT_EQ(calls[1].waits_before, 1);
  EXPECT_EQ(sets_.waits_.load(), 1);
}

TEST_F(ModelControllerTest, AnAutoscalerMoveOnAModelHoldingAllItsCpusHandsThemOver) {
  Make(true, FourThreadsWin(), 8);
  // Eight one-thread runtimes on all 8 CPUs (2.5 rows/s at b=1 each) at 5 rows/s: the
  // estimator's step down to 2×⟨4,1⟩ (rule 2a: B = 2 gives up no capacity, and its p99 is
  // lower) must not start its runtimes beside the busy ones.
  sets_.Serve({{8, 1, 1}}, *optimizer_->SolveOnInstances(std::vector<int>(8, 1), 8));
  sets_.cpus_ = 8;
  in_system_ = 3;
  TickUntil(1, 400, 20, 1);  // 5 rows/s
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  const std::optional<Reason> hold = controller_->Snapshot().last_hold;
  ASSERT_EQ(calls.size(), 3u) << (hold ? hold->text : "no hold");
  // Stage 1 starts nothing (no CPU is free): it drops the one runtime whose loss keeps the p99
  // near the serving set's and, since that frees too few CPUs for a four-thread runtime, the
  // fewest more that do, the rest serving the load; stage 2 starts that runtime and drops the
  // others; then the plan itself starts its second runtime on the CPUs those freed.
  EXPECT_EQ(calls[0].groups, (std::vector<InstanceGroup>{{4, 1, 2}}));
  EXPECT_NE(calls[0].reason.find("stage 1"), std::string::npos) << calls[0].reason;
  EXPECT_EQ(calls[1].groups, (std::vector<InstanceGroup>{{1, 4, 1}}));
  EXPECT_NE(calls[1].reason.find("stage 2"), std::string::npos) << calls[1].reason;
  EXPECT_EQ(calls[2].groups, (std::vector<InstanceGroup>{{2, 4, 1}}));
  EXPECT_EQ(calls[2].reason.find("stage"), std::string::npos) << calls[2].reason;
  // Each stage's drain is waited for; the last set's is not: the control thread decides again
  // while it drains.
  EXPECT_EQ(calls[1].waits_before, 1);
  EXPECT_EQ(calls[2].waits_before, 2);
  EXPECT_EQ(sets_.waits_.load(), 2);
  const ControllerSnapshot s = controller_->Snapshot();
  ASSERT_EQ(s.moves.size(), 1u);
  EXPECT_EQ(s.moves[0].reason.rule, Rule::kEstimatorStepDown) << s.moves[0].reason.text;
  EXPECT_EQ(s.moves[0].state, MoveRecord::State::kServing);
}

TEST_F(ModelControllerTest, AJobPostedDuringAMigrationGoesFirstAfterTheStage) {
  Make(true, FourThreadsWin(), 8);
  // The autoscaler's staged move of the test above; the node partition posts a resize while its
  // first stage starts.
  sets_.Serve({{8, 1, 1}}, *optimizer_->SolveOnInstances(std::vector<int>(8, 1), 8));
  sets_.cpus_ = 8;
  bool resized = false;
  sets_.on_switch = [&] {
    if (sets_.calls().size() == 1) controller_->Post([&resized] { resized = true; });
  };
  in_system_ = 3;
  TickUntil(1, 400, 20, 1);  // 5 rows/s
  // Stage 1 serves, and the migration ends there: the resize changes the budget its later
  // stages were planned for.
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].reason.find("stage 1"), std::string::npos) << calls[0].reason;
  const ControllerSnapshot s = controller_->Snapshot();
  ASSERT_EQ(s.moves.size(), 1u);
  EXPECT_EQ(s.moves[0].state, MoveRecord::State::kServing);
  controller_->Stop();  // the job left runs
  EXPECT_TRUE(resized);
}

TEST_F(ModelControllerTest, AShrinkAtOnceServesOnTheRuntimesLeftWithoutAStart) {
  Make(true, FourThreadsWin(), 8);
  sets_.Serve({{2, 4, 4}}, *optimizer_->Solve(8, 8));
  sets_.cpus_ = 8;
  ResizeRequest r;
  r.threads = 4;
  r.plan = *optimizer_->Solve(4, 8);
  r.at_once = true;
  sets_.cpus_ = 4;
  // Of the two runtimes one lies inside the smaller share.
  sets_.KeepableOnce({4});
  ASSERT_TRUE(controller_->Resize(r).ok());
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].groups, (std::vector<InstanceGroup>{{1, 4, 8}}));
  EXPECT_NE(calls[0].reason.find("at once"), std::string::npos) << calls[0].reason;
  // Done once the runtime outside the share has drained: its CPUs are another model's.
  EXPECT_EQ(calls[0].waits_before, 0);
  EXPECT_EQ(sets_.waits_.load(), 1);
}

TEST_F(ModelControllerTest, AResizeWithoutAPlanTakesTheMostCapacityOfTheNewBudget) {
  Make(true, SlowProfile(), 2);
  // B = 6 on two one-thread runtimes; the partition gives one CPU and no plan (none serves the
  // rate there). One instance cannot run B = 6 (no profiled b is 6): the optimizer has no plan
  // for the serving B, and the resize must not fail for it (the partition would try again and
  // again).
  sets_.Serve({{1, 1, 2}, {1, 1, 4}});
  ASSERT_FALSE(optimizer_->Solve(1, 6).ok());
  ResizeRequest r;
  r.threads = 1;
  ASSERT_TRUE(controller_->Resize(r).ok());
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_EQ(calls.size(), 1u);
  // b = 8 runs the most rows/s on one thread (20; b = 4 runs 13.3).
  EXPECT_EQ(calls[0].groups, (std::vector<InstanceGroup>{{1, 1, 8}}));
}

TEST_F(ModelControllerTest, AResizeWithoutAPlanFitsTheNewBudget) {
  Make(true, FourThreadsWin(), 8);
  // Two four-thread runtimes serve; the partition leaves one CPU and no plan. Whatever plan the
  // model takes must fit that CPU: one the serving runtimes run does not.
  sets_.Serve({{2, 4, 4}}, *optimizer_->Solve(8, 8));
  ResizeRequest r;
  r.threads = 1;
  ASSERT_TRUE(controller_->Resize(r).ok());
  const std::vector<FakeSwitcher::Call> calls = sets_.calls();
  ASSERT_FALSE(calls.empty());
  for (const InstanceGroup& g : calls.back().groups) EXPECT_EQ(g.threads, 1);
  EXPECT_EQ(calls.back().groups.size(), 1u);
  EXPECT_EQ(calls.back().groups[0].count, 1);
}

TEST_F(ModelControllerTest, AFailedMoveLeavesTheServingSetAndIsNotAHoldOff) {
  Make(true);
  sets_.Serve({{1, 1, 1}}, *optimizer_->Solve(1, 1));
  sets_.fail_ = true;
  in_system_ = 6;
  TickUntil(2, 400, 10, 3);  // 30 rows/s
  // It tried, failed, and after a new overload window tried again.
  EXPECT_EQ(sets_.calls().size(), 2u);
  const ControllerSnapshot snapshot = controller_->Snapshot();
  ASSERT_FALSE(snapshot.moves.empty());
  EXPECT_EQ(snapshot.moves[0].state, MoveRecord::State::kFailed);
  EXPECT_EQ(snapshot.moves[0].error, "no room");
  EXPECT_EQ(sets_.active()->target_rows, 1);
}

TEST_F(ModelControllerTest, DeadRuntimesAreReplacedThenRetriedAfterTheBackoff) {
  Make(false);
  sets_.Serve({{2, 1, 4}});
  sets_.dead_ = true;
  sets_.fail_ = true;
  const SteadyTime start = clock_.Now();
  controller_->Tick(start);
  ASSERT_EQ(sets_.calls().size(), 1u);
  EXPECT_TRUE(sets_.calls()[0].restart);
  EXPECT_EQ(sets_.calls()[0].groups, (std::vector<InstanceGroup>{{2, 1, 4}}));
  controller_->Tick(start + milliseconds(4000));  // within the backoff
  EXPECT_EQ(sets_.calls().size(), 1u);
  controller_->Tick(start + milliseconds(5000));
  EXPECT_EQ(sets_.calls().size(), 2u);
}

TEST_F(ModelControllerTest, RestartSoonSkipsTheBackoff) {
  Make(false);
  sets_.Serve({{1, 1, 2}});
  sets_.dead_ = true;
  sets_.fail_ = true;
  controller_->Tick(clock_.Now());
  ASSERT_EQ(sets_.calls().size(), 1u);
  controller_->Start();
  const uint64_t sleeps = clock_.sleeps();
  controller_->RestartSoon();  // a runtime died: at once, whatever the backoff
  ASSERT_TRUE(clock_.AwaitSleeps(sleeps + 1));
  EXPECT_EQ(sets_.calls().size(), 2u);
  controller_->Stop();
}

TEST_F(ModelControllerTest, AManagementBatchServesTheOptimizersPlanAndEndsAdaptation) {
  Make(true);
  sets_.Serve({{1, 1, 1}}, *optimizer_->Solve(1, 1));
  PlanChange change;
  change.batch = 4;
  ASSERT_TRUE(controller_->ApplyChange(change).ok());
  ASSERT_EQ(sets_.calls().size(), 1u);
  EXPECT_EQ(sets_.calls()[0].groups, (std::vector<InstanceGroup>{{1, 1, 4}}));
  EXPECT_EQ(sets_.calls()[0].reason, "management API: B=4");
  // Answered once the old set has drained: the answer reports the change done.
  EXPECT_EQ(sets_.waits_.load(), 1);
  EXPECT_FALSE(controller_->Snapshot().adaptive);
  change.batch.reset();
  change.adaptive = true;
  ASSERT_TRUE(controller_->ApplyChange(change).ok());
  EXPECT_EQ(sets_.calls().size(), 1u);  // adaptive alone switches nothing
  EXPECT_TRUE(controller_->Snapshot().adaptive);
}

TEST_F(ModelControllerTest, JobsRunInOrderAndThoseLeftAtStopStillRun) {
  Make(false);
  sets_.Serve({{1, 1, 1}});
  std::vector<int> ran;
  Mutex mu;
  controller_->Start();
  for (int i = 0; i < 5; ++i) {
    controller_->Post([&, i] {
      MutexLock lock(&mu);
      ran.push_back(i);
    });
  }
  controller_->Stop();
  controller_->Post([&] {  // after Stop: at once, on this thread
    MutexLock lock(&mu);
    ran.push_back(5);
  });
  MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST_F(ModelControllerTest, NothingHappensWhileTheModelDoesNotServe) {
  Make(true);
  sets_.Serve({{1, 1, 1}}, *optimizer_->Solve(1, 1));
  sets_.dead_ = true;
  serving_ = false;
  controller_->Tick(clock_.Now());
  EXPECT_TRUE(sets_.calls().empty());
  EXPECT_EQ(samples_.load(), 0);
}

TEST(AutoscalerOptionsForTest, TheBurstReserveIsAShareOfTheBatchLatencyLimit) {
  ModelConfig config;
  config.batching.max_batch_latency_ms = 500;
  EXPECT_DOUBLE_EQ(AutoscalerOptionsFor(config, 16, true).burst_reserve_ms, 25);
  config.batching.max_batch_latency_ms = 0;  // no limit: no share of it
  EXPECT_DOUBLE_EQ(AutoscalerOptionsFor(config, 16, true).burst_reserve_ms, 0);
  config.batching.max_batch_latency_ms = 500;
  config.generation.enabled = true;  // a decoder's B is decode slots: no rate, no reserve
  EXPECT_DOUBLE_EQ(AutoscalerOptionsFor(config, 16, true).burst_reserve_ms, 0);
}

}  // namespace
}  // namespace packrat
