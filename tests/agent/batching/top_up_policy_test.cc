// The LBCI admission policy (top_up_policy.h) on a deterministic fake staged model whose stage
// times are known exactly: single predictions, then a discrete-event simulation of instances
// that start batches from the real BatchAggregator and top them up at stage boundaries through
// the same TakeFront + TopUpAdmission path the agent uses. Time is simulated, so the test is
// exact and instant.
#include "agent/batching/top_up_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "agent/batching/batch_aggregator.h"
#include "tests/agent/batching/fake_executor.h"

namespace packrat {
namespace {

using batching_test::Completion;
using batching_test::MakeRequest;
using std::chrono::nanoseconds;

// The fake model: per-sample time follows the paper's four-parameter curve, and stage i always
// takes kShare[i] of a batch's time. So the fitted profile predicts it exactly.
constexpr double kShare[] = {0.15, 0.25, 0.35, 0.25};
constexpr int kStages = 4;
double PerSampleMs(double b) { return 4.0 + (12.0 - 4.0) / (1 + std::pow(b / 3.0, 1.2)); }
double StageMs(int stage, int64_t rows) {
  return kShare[stage] * static_cast<double>(rows) * PerSampleMs(static_cast<double>(rows));
}

std::shared_ptr<const StageProfile> FakeProfile(int64_t max_batch) {
  std::vector<StageProfile::Run> runs;
  for (int64_t b = 1; b <= max_batch; ++b) {
    StageProfile::Run r;
    r.batch = b;
    for (int i = 0; i < kStages; ++i) r.stage_ms.push_back(StageMs(i, b));
    runs.push_back(r);
  }
  auto p = StageProfile::Create(runs);
  EXPECT_TRUE(p.ok());
  return std::make_shared<const StageProfile>(std::move(p).value());
}

SteadyTime At(double ms) {
  return SteadyTime{} +
         std::chrono::duration_cast<nanoseconds>(std::chrono::duration<double, std::milli>(ms));
}
double Ms(SteadyTime t) {
  return std::chrono::duration<double, std::milli>(t - SteadyTime{}).count();
}

TEST(TopUpPolicyTest, PredictsTheFourTerms) {
  TopUpPolicy policy(FakeProfile(16), 200);
  EXPECT_DOUBLE_EQ(policy.strict_budget_ms(), 200);  // no fluctuation in the fake
  TopUpQuery q;
  q.rows = 2;
  q.stages_done = 1;
  q.num_stages = kStages;
  q.elapsed = std::chrono::milliseconds(5);
  q.max_rows = 14;
  const auto p = policy.Predict(q, 3, std::chrono::milliseconds(7));
  EXPECT_NEAR(p.wait_ms, 7, 1e-9);
  EXPECT_NEAR(p.done_ms, 5, 1e-9);
  EXPECT_NEAR(p.add_ms, StageMs(0, 3), 1e-3);
  EXPECT_NEAR(p.rest_ms, StageMs(1, 5) + StageMs(2, 5) + StageMs(3, 5), 1e-3);
  EXPECT_TRUE(policy.Admits(p));
  // N_opt: the largest batch whose time fits the budget.
  int64_t expected = 1;
  for (int64_t b = 1; b <= 16; ++b) {
    if (b * PerSampleMs(static_cast<double>(b)) <= 200) expected = b;
  }
  EXPECT_EQ(policy.optimal_batch(), expected);
}

TEST(TopUpPolicyTest, AdmissionTakesWholeRequestsWhileTheBudgetHolds) {
  TopUpPolicy policy(FakeProfile(16), 70);
  BatchAggregator queue({/*target_rows=*/16, std::chrono::microseconds(0), 1000});
  std::vector<std::unique_ptr<Completion>> done;
  for (int i = 0; i < 6; ++i) {
    done.push_back(std::make_unique<Completion>());
    ASSERT_TRUE(queue.Enqueue(MakeRequest(i, 2, done.back().get(), At(10 + i))).ok());
  }
  TopUpQuery q;
  q.rows = 1;
  q.stages_done = 1;
  q.num_stages = kStages;
  q.elapsed = std::chrono::milliseconds(8);
  q.max_rows = 15;
  TopUpAdmission admission(policy, q, At(20));
  const auto taken = queue.TakeFront(std::ref(admission));
  // Rows are admitted two at a time (whole requests) while t_all stays under 70 ms.
  int64_t rows = 0;
  for (const auto& r : taken) rows += r->rows();
  ASSERT_GT(rows, 0);
  ASSERT_LT(rows, 12);
  EXPECT_TRUE(admission.refused());
  const auto fits = policy.Predict(q, rows, std::chrono::milliseconds(10));
  const auto next = policy.Predict(q, rows + 2, std::chrono::milliseconds(10));
  EXPECT_LT(fits.total_ms(), 70);
  EXPECT_GE(next.total_ms(), 70);
  EXPECT_EQ(queue.queued_rows(), 12 - rows);
  EXPECT_EQ(taken.front()->decoded().id, "0");  // from the front, in order
}

TEST(TopUpPolicyTest, RoomAndShapeLimitTheAdmission) {
  TopUpPolicy policy(FakeProfile(8), 1e6);
  BatchAggregator queue({8, std::chrono::microseconds(0), 1000});
  Completion c1, c2;
  ASSERT_TRUE(queue.Enqueue(MakeRequest(1, 3, &c1, At(0))).ok());
  ASSERT_TRUE(queue.Enqueue(MakeRequest(2, 3, &c2, At(0))).ok());
  TopUpQuery q;
  q.rows = 3;
  q.stages_done = 2;
  q.num_stages = kStages;
  q.max_rows = 5;  // room for one of the two requests
  TopUpAdmission admission(policy, q, At(1));
  EXPECT_EQ(queue.TakeFront(std::ref(admission)).size(), 1u);
  EXPECT_TRUE(admission.refused());

  // A request whose rows have another width cannot join (its rows would not concatenate).
  Completion running;
  const auto like = MakeRequest(9, 1, &running, At(0), /*width=*/2);
  BatchAggregator other({8, std::chrono::microseconds(0), 1000});
  Completion c4;
  ASSERT_TRUE(other.Enqueue(MakeRequest(4, 1, &c4, At(0), /*width=*/5)).ok());
  q.max_rows = 5;
  q.like = like.get();
  TopUpAdmission by_shape(policy, q, At(1));
  EXPECT_TRUE(other.TakeFront(std::ref(by_shape)).empty());
  EXPECT_TRUE(by_shape.refused());
}

// One simulated instance: the batch it runs and where it is.
struct SimInstance {
  bool busy = false;
  std::vector<std::shared_ptr<InferenceRequest>> requests;
  int64_t rows = 0;
  int stage = 0;       // the stage running (its end is `stage_end`)
  bool asking = true;  // may still ask for rows
  SteadyTime start{};  // when the batch started computing
  SteadyTime stage_end{};
};

struct SimResult {
  std::map<std::string, int> answered;  // per request id: times answered
  std::map<std::string, double> latency_ms;
  std::map<std::string, bool> joined;  // joined a running batch
  int topups = 0;
  int64_t topup_rows = 0;
  double worst_prediction_error_ms = 0;  // |predicted completion − simulated| over admissions
};

// Runs `arrivals` (time, rows) through `instances` instances of the fake model with layered
// batching: a free instance takes up to N_opt queued rows at once; after each stage but the
// last it asks for more (until rows joined or the answer is final), as the runtime does.
SimResult Simulate(const TopUpPolicy& policy,
                   const std::vector<std::pair<double, int64_t>>& arrivals, int instances,
                   int64_t max_rows) {
  BatchAggregator queue({policy.optimal_batch(), std::chrono::microseconds(0), 1 << 20});
  std::vector<std::unique_ptr<Completion>> completions;
  std::vector<SimInstance> sim(instances);
  SimResult result;
  std::map<std::string, double> predicted_end;  // by request id
  size_t next = 0;
  auto finish_stage = [&](SimInstance& in, SteadyTime now) {
    // After stage `in.stage`: ask for rows (not after the last stage), then go on.
    if (in.stage + 1 < kStages && in.asking) {
      TopUpQuery q;
      q.rows = in.rows;
      q.stages_done = in.stage + 1;
      q.num_stages = kStages;
      q.elapsed = now - in.start;
      q.max_rows = max_rows - in.rows;
      q.like = in.requests.front().get();
      TopUpAdmission admission(policy, q, now);
      const auto taken = queue.TakeFront(std::ref(admission));
      int64_t added = 0;
      for (const auto& r : taken) {
        added += r->rows();
        result.joined[r->decoded().id] = true;
        in.requests.push_back(r);
      }
      in.asking = added == 0 && !admission.refused();
      if (added > 0) {
        ++result.topups;
        result.topup_rows += added;
        // The joining rows run stages 0..k, then everything continues.
        double catch_up = 0;
        for (int i = 0; i <= in.stage; ++i) catch_up += StageMs(i, added);
        in.rows += added;
        // Predicted completion = now + t_add + t_rest.
        const TopUpPolicy::Prediction& p = admission.last();
        for (const auto& r : taken) predicted_end[r->decoded().id] = Ms(now) + p.add_ms + p.rest_ms;
        now = At(Ms(now) + catch_up);
      }
    }
    if (++in.stage == kStages) {
      for (const auto& r : in.requests) {
        const std::string& id = r->decoded().id;
        ++result.answered[id];
        result.latency_ms[id] = Ms(now) - Ms(r->arrival());
        if (auto it = predicted_end.find(id); it != predicted_end.end()) {
          result.worst_prediction_error_ms =
              std::max(result.worst_prediction_error_ms, std::abs(it->second - Ms(now)));
        }
      }
      in = SimInstance();
      return;
    }
    in.stage_end = At(Ms(now) + StageMs(in.stage, in.rows));
  };
  while (true) {
    // The next event: an arrival or the earliest stage end.
    SimInstance* first = nullptr;
    for (SimInstance& in : sim) {
      if (in.busy && (!first || in.stage_end < first->stage_end)) first = &in;
    }
    const bool arrival_next =
        next < arrivals.size() && (!first || At(arrivals[next].first) <= first->stage_end);
    if (!arrival_next && !first) break;
    SteadyTime now;
    if (arrival_next) {
      now = At(arrivals[next].first);
      completions.push_back(std::make_unique<Completion>());
      EXPECT_TRUE(queue
                      .Enqueue(MakeRequest(static_cast<int64_t>(next), arrivals[next].second,
                                           completions.back().get(), now))
                      .ok());
      ++next;
    } else {
      now = first->stage_end;
      finish_stage(*first, now);
    }
    // Free instances start batches of up to N_opt rows at once.
    for (SimInstance& in : sim) {
      if (in.busy) continue;
      std::optional<Batch> batch = queue.Poll(now);
      if (!batch) break;
      in.busy = true;
      in.requests = batch->requests;
      in.rows = batch->rows;
      in.stage = 0;
      in.asking = true;
      in.start = now;
      in.stage_end = At(Ms(now) + StageMs(0, in.rows));
    }
  }
  return result;
}

std::vector<std::pair<double, int64_t>> Poisson(double per_second, double seconds, int64_t max_rows,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(per_second / 1000.0);
  std::uniform_int_distribution<int64_t> rows(1, max_rows);
  std::vector<std::pair<double, int64_t>> out;
  for (double t = gap(rng); t < seconds * 1000; t += gap(rng)) out.emplace_back(t, rows(rng));
  return out;
}

TEST(TopUpPolicyTest, SimulatedLoadRespectsTheBudgetAndLosesNothing) {
  constexpr double kBudget = 150;
  TopUpPolicy policy(FakeProfile(16), kBudget);
  for (int instances : {1, 2}) {
    for (int64_t rows_per_request : {int64_t{1}, int64_t{3}}) {
      SCOPED_TRACE(std::to_string(instances) + " instance(s), up to " +
                   std::to_string(rows_per_request) + " rows per request");
      // About half the instances' capacity at N_opt: batches often start small.
      const double capacity = instances * 1000.0 * static_cast<double>(policy.optimal_batch()) /
                              (policy.optimal_batch() * PerSampleMs(policy.optimal_batch()));
      const auto arrivals =
          Poisson(0.5 * capacity / (rows_per_request == 1 ? 1 : 2), 60, rows_per_request, 11);
      const SimResult r = Simulate(policy, arrivals, instances, 16);
      // Every request answered exactly once.
      ASSERT_EQ(r.answered.size(), arrivals.size());
      for (const auto& [id, n] : r.answered) ASSERT_EQ(n, 1) << "request " << id;
      // Rows did join running batches, and each of them finished within the budget.
      EXPECT_GT(r.topups, 10);
      int joined = 0;
      for (const auto& [id, yes] : r.joined) {
        ++joined;
        EXPECT_LE(r.latency_ms.at(id), kBudget)
            << "request " << id << " joined and took " << r.latency_ms.at(id) << " ms";
      }
      EXPECT_GT(joined, 0);
      // The predictor is exact for this model up to the fit.
      EXPECT_LT(r.worst_prediction_error_ms, 0.5);
    }
  }
}

TEST(TopUpPolicyTest, NoRowsJoinWhenTheBudgetIsTight) {
  // A budget below one batch of a single row: N_opt = 1 and no admission ever passes.
  TopUpPolicy policy(FakeProfile(8), 5);
  EXPECT_EQ(policy.optimal_batch(), 1);
  const SimResult r = Simulate(policy, Poisson(40, 10, 1, 5), 1, 8);
  EXPECT_EQ(r.topups, 0);
  for (const auto& [id, n] : r.answered) EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace packrat
