// Rule 0 of the autoscaling policy (autoscaler.h): a queue whose oldest row waits too long for
// a whole window moves the model to the plan of most capacity at once, whatever the arrival
// rate says and whatever the move costs.
#include <algorithm>
#include <cmath>
#include <optional>

#include "tests/agent/planning/autoscaler_fixture.h"

namespace packrat {
namespace {

// A fixed 40 ms a batch plus 10 ms a row over √t: batches pay, threads pay less. B = 1 runs
// fat (⟨1,8,1⟩, 43.5 ms: 23 rows/s, 118 in batches of 8 cut from a backlog); B = 8 one
// instance a thread (⟨8,1,1⟩, 50 ms: 160 rows/s).
std::optional<double> FixedCostPerBatch(int threads, int batch) {
  return 40.0 + 10.0 * batch / std::sqrt(threads);
}

class AutoscalerBehindTest : public AutoscalerTest {
 protected:
  void SetUp() override {
    SetUpModel(8, FixedCostPerBatch, [](AutoscalerOptions* o) { o->p99_target_ms = 100; });
    Serve(1);
  }
  // The most capacity any B's plan runs on the serving view.
  double MostCapacity() const {
    double most = 0;
    for (int64_t b = 1; b <= 8; b *= 2) {
      if (auto c = autoscaler_->PlanFor(b, view_, std::nullopt)) most = std::max(most, c->capacity);
    }
    return most;
  }
};

// Clients with a bounded pool send no faster than they are answered: the arrivals (20 rows/s)
// stay below what the serving plan runs (~24), so no rate shows the overload. The queue does.
TEST_F(AutoscalerBehindTest, AnOverloadThatHidesItsRateIsSeenInItsQueue) {
  const double serving = 1000.0 / *FixedCostPerBatch(8, 1) * 1;
  ASSERT_LT(20, serving);
  view_.oldest_wait_ms = 3000;  // 64 rows queued for 3 s: far beyond twice the 100-ms target
  const double most = MostCapacity();
  ASSERT_GT(most, 2 * serving);
  std::optional<Decision> d;
  int ticks = 0;
  while (!d && ticks < 100) {
    Decision next = Tick(64, 20, /*carry_out=*/false);
    ++ticks;
    if (next.move) d = std::move(next);
  }
  ASSERT_TRUE(d.has_value());
  // The wait had passed its bound 2.8 s before the first sample: no window left to wait for.
  EXPECT_LE(ticks, 1);
  const Reason& r = d->move->reason;
  EXPECT_EQ(r.rule, Rule::kBehind);
  EXPECT_EQ(*r.oldest_wait_ms, 3000);
  // Twice the 2-ms delay and two batches of 8 rows cut from the backlog (68 ms each): longer
  // than twice the 100-ms target.
  EXPECT_EQ(*r.behind_wait_ms, 2 * (2 + 2 * *FixedCostPerBatch(8, 8)));
  EXPECT_DOUBLE_EQ(*r.target_capacity, most);
  EXPECT_TRUE(d->restart_arrivals);
}

// The window counts from when the wait passed its bound; a wait that falls back resets it.
TEST_F(AutoscalerBehindTest, AWaitBeyondItsBoundForLessThanTheWindowMovesNothing) {
  const double bound = 2 * (2 + 2 * *FixedCostPerBatch(8, 8));
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 15; ++i) {  // 150 ms beyond the bound, of a 200-ms window
      view_.oldest_wait_ms = bound + 10.0 * (i + 1);
      const Decision d = Tick(1, 20);
      ASSERT_FALSE(d.move.has_value()) << d.move->reason.text;
    }
    view_.oldest_wait_ms = bound / 2;
    const Decision d = Tick(1, 20);
    ASSERT_FALSE(d.move.has_value()) << d.move->reason.text;
  }
  // Held on beyond the bound, it moves once the window is full.
  std::optional<Decision> d;
  int ticks = 0;
  for (; !d && ticks < 100; ++ticks) {
    view_.oldest_wait_ms = bound + 10.0 * (ticks + 1);
    Decision next = Tick(1, 20, /*carry_out=*/false);
    if (next.move) d = std::move(next);
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->move->reason.rule, Rule::kBehind);
  EXPECT_EQ(ticks, 20);
}

// Serving the most capacity already, there is nowhere to go: a hold, and the queue is left to
// the other rules (and to max_queue_rows).
TEST_F(AutoscalerBehindTest, AtTheMostCapacityItHolds) {
  view_.oldest_wait_ms = 3000;
  std::optional<Decision> first = TickUntil(Rule::kBehind, 64, 20, 100);
  ASSERT_TRUE(first.has_value());  // carried out: the view serves it
  // Still behind after a whole window on the new plan: a hold, never another move.
  std::optional<Reason> hold;
  for (int i = 0; i < 100; ++i) {
    Decision d = Tick(64, 20);
    ASSERT_FALSE(d.move && d.move->reason.rule == Rule::kBehind) << d.move->reason.text;
    if (d.hold && d.hold->rule == Rule::kBehindAtMostCapacity) hold = d.hold;
  }
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->oldest_wait_ms, 3000);
}

// Behind, latency is already lost: a batch-latency limit that every plan breaks at the measured
// slowdowns (here 30 ms, below any batch of this profile) still leaves the most capacity.
TEST_F(AutoscalerBehindTest, ABatchLatencyLimitDoesNotKeepAModelBehind) {
  SetUpModel(8, FixedCostPerBatch, [](AutoscalerOptions* o) {
    o->p99_target_ms = 100;
    o->evaluation.max_batch_latency_ms = 30;
  });
  Serve(1);
  view_.oldest_wait_ms = 3000;
  std::optional<Decision> d = TickUntil(Rule::kBehind, 64, 20, 100);
  ASSERT_TRUE(d.has_value());
  EXPECT_GT(*d->move->reason.target_capacity, 2 * *d->move->reason.serving_capacity);
}

// Behind on a profile whose capacity creeps up with B (2 ms a batch, 10 ms a row: 83, 91, 95
// and 98 rows/s at B = 1, 2, 4, 8): the smallest B within 5 % of the most capacity, not the
// largest, since a row waits for its whole batch whatever comes next.
TEST_F(AutoscalerBehindTest, ItTakesTheSmallestBatchNearTheMostCapacity) {
  SetUpModel(
      1, [](int, int b) -> std::optional<double> { return 2.0 + 10.0 * b; },
      [](AutoscalerOptions* o) { o->p99_target_ms = 100; });
  Serve(1);
  view_.oldest_wait_ms = 3000;
  std::optional<Decision> d = TickUntil(Rule::kBehind, 64, 20, 100);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->move->reason.to_batch, 4) << d->move->reason.text;
}

// A static plan is never moved.
TEST_F(AutoscalerBehindTest, AStaticPlanIsNotMoved) {
  view_.adaptive = false;
  view_.oldest_wait_ms = 3000;
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(Tick(64, 20).move.has_value());
}

// The policy is a function of its state: Decide() changes nothing, and the window rule 0 counts
// comes back in the decision's next state, where the owner keeps it.
TEST_F(AutoscalerBehindTest, TheWindowComesBackAsStateAndDecideChangesNothing) {
  const double bound = 2 * (2 + 2 * *FixedCostPerBatch(8, 8));
  view_.oldest_wait_ms = bound + 50;  // crossed 50 ms ago: 150 ms of the 200-ms window left
  Tick(64, 20, /*carry_out=*/false);
  const PolicyState before = autoscaler_->state();
  ASSERT_TRUE(before.behind_since.has_value());
  // The same question twice gets the same answer, and the autoscaler's own state stays.
  const Decision first = autoscaler_->Decide(view_, *load_, before, now_);
  const Decision second = autoscaler_->Decide(view_, *load_, before, now_);
  EXPECT_FALSE(first.move.has_value());
  EXPECT_EQ(first.next.behind_since, before.behind_since);
  EXPECT_EQ(second.next.behind_since, before.behind_since);
  EXPECT_EQ(autoscaler_->state().behind_since, before.behind_since);
  // Past the window, the move; from a state without the window, none yet.
  const SteadyTime later = now_ + std::chrono::milliseconds(200);
  view_.oldest_wait_ms = bound + 250;
  const Decision moved = autoscaler_->Decide(view_, *load_, before, later);
  ASSERT_TRUE(moved.move.has_value());
  EXPECT_EQ(moved.move->reason.rule, Rule::kBehind);
  const Decision fresh = autoscaler_->Decide(view_, *load_, PolicyState{}, later);
  EXPECT_TRUE(fresh.move.has_value()) << "the wait itself dates the crossing";
  PolicyState after_move;
  after_move.last_applied = later;
  EXPECT_FALSE(autoscaler_->Decide(view_, *load_, after_move, later).move.has_value())
      << "the window starts after the last move carried out";
  // Carried out, the move starts the scale-down delay and the backlog's drain, and the
  // estimator starts afresh.
  bool restart = false;
  const PolicyState next = Autoscaler::AfterMove(moved.next, *moved.move, true, later, &restart);
  EXPECT_TRUE(restart);
  EXPECT_TRUE(next.backlog);
  EXPECT_EQ(next.last_overload_move, later);
  EXPECT_FALSE(next.behind_since.has_value());
  // Not carried out (the new set failed), nothing changes but the state's window.
  const PolicyState failed = Autoscaler::AfterMove(moved.next, *moved.move, false, later, &restart);
  EXPECT_FALSE(restart);
  EXPECT_FALSE(failed.backlog);
  EXPECT_FALSE(failed.last_overload_move.has_value());
}

}  // namespace
}  // namespace packrat
