// The joint partition of a node's CPUs: the objective's stages on made-up profiles, exactness
// against a brute-force enumeration of every allocation, the envelope against the rule asked
// at each CPU count, the rules against the autoscaler's own (PlanFor, BatchForRate), and the
// published 16-core profiles.
#include "agent/planning/joint_partition.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "agent/planning/autoscaler.h"
#include "agent/planning/batch_for_rate.h"
#include "agent/planning/batching_simulator.h"
#include "agent/planning/plan_evaluator.h"
#include "gtest/gtest.h"

namespace packrat {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Amdahl-style latencies, threads 1..max_threads × batch 1, 2, 4, ..., max_batch: `fixed_ms` a
// batch plus `row_ms` a row, of which `serial` does not parallelise.
Profile AmdahlProfile(int max_threads, int max_batch, double fixed_ms, double row_ms,
                      double serial) {
  Profile p;
  for (int t = 1; t <= max_threads; ++t) {
    for (int b = 1; b <= max_batch; b *= 2) {
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = fixed_ms + row_ms * b * (serial + (1 - serial) / t);
      EXPECT_TRUE(p.Add(point).ok());
    }
  }
  return p;
}

std::unique_ptr<Optimizer> Published(const std::string& model) {
  StatusOr<Profile> profile =
      Profile::LoadCsv(std::string(PACKRAT_PROFILES_DIR) + "/" + model + "-xeon6142-16c.csv");
  EXPECT_TRUE(profile.ok()) << profile.status().ToString();
  return std::make_unique<Optimizer>(profile.ok() ? *std::move(profile) : Profile());
}

ModelDemand Demand(std::string name, const Optimizer& optimizer, double rate,
                   int64_t max_batch = 8) {
  ModelDemand d;
  d.name = std::move(name);
  d.optimizer = &optimizer;
  d.rate = rate;
  d.max_batch = max_batch;
  return d;
}

double P99(const std::optional<RatePlan>& p) { return p ? p->simulated.p99_ms : kInf; }

// The objective of one allocation, from each model's envelope, as the header states it.
struct Objective {
  bool all_met = true;
  int unsustained = 0;
  double worst = 0;  // of the finite ratios
  double sum = 0;    // of the finite ratios
  int cpus = 0;

  // Lexicographic: met first, then fewer unsustained, lower worst, lower sum, fewer CPUs.
  bool operator<(const Objective& o) const {
    return std::make_tuple(!all_met, unsustained, worst, sum, cpus) <
           std::make_tuple(!o.all_met, o.unsustained, o.worst, o.sum, o.cpus);
  }
};

// What the header's objective needs of each model, from the envelopes JointPartition::Envelope
// reports (and, for a model no CPU count sustains, the capacity of its max_batch plans).
struct Scored {
  std::vector<std::vector<std::optional<RatePlan>>> envelopes;
  std::vector<double> references;
  std::vector<std::vector<double>> overload;  // rule 6 per c (∞ where not overloaded)
};

Scored Score(JointPartition& partition, const std::vector<ModelDemand>& models, int total) {
  const size_t n = models.size();
  Scored s{std::vector<std::vector<std::optional<RatePlan>>>(n), std::vector<double>(n),
           std::vector<std::vector<double>>(n, std::vector<double>(total + 1, kInf))};
  int floors = 0;
  for (const ModelDemand& m : models) floors += m.min_threads;
  const BatchingSimulator simulator;
  for (size_t i = 0; i < n; ++i) {
    const ModelDemand& m = models[i];
    if (m.rate <= 0) continue;
    auto envelope = partition.Envelope(m, total);
    EXPECT_TRUE(envelope.ok()) << envelope.status().ToString();
    s.envelopes[i] = *envelope;
    s.references[i] = m.p99_target_ms.value_or(P99(s.envelopes[i][total]));
    const int most = total - floors + m.min_threads;
    bool sustainable = false;
    for (int c = m.min_threads; c <= most; ++c) sustainable = sustainable || s.envelopes[i][c];
    if (sustainable) continue;
    // 10⁶ + rate / capacity, the best of up to c CPUs.
    const PlanEvaluator eval(*m.optimizer, simulator, m.evaluation, m.slowdown);
    double best = kInf;
    for (int c = m.min_threads; c <= most; ++c) {
      StatusOr<Plan> plan = m.optimizer->Solve(c, static_cast<int>(m.max_batch));
      const double capacity = plan.ok() ? eval.Capacity(*plan) : 0;
      if (capacity > 0) best = std::min(best, 1e6 + m.weight * m.rate / capacity);
      s.overload[i][c] = best;
    }
  }
  return s;
}

// The objective of the allocation `c` (CPUs per model), as the header states it.
Objective ObjectiveOf(const std::vector<ModelDemand>& models, const Scored& s,
                      const std::vector<int>& c) {
  Objective o;
  for (size_t k = 0; k < models.size(); ++k) {
    o.cpus += c[k];
    if (models[k].rate <= 0) continue;
    const double p99 = P99(s.envelopes[k][static_cast<size_t>(c[k])]);
    if (models[k].p99_target_ms && !(p99 <= *models[k].p99_target_ms)) o.all_met = false;
    double ratio = std::isinf(p99) || std::isinf(s.references[k])
                       ? kInf
                       : models[k].weight * p99 / s.references[k];
    if (std::isinf(ratio)) ratio = s.overload[k][static_cast<size_t>(c[k])];
    if (std::isinf(ratio)) {
      ++o.unsustained;
    } else {
      o.worst = std::max(o.worst, ratio);
      o.sum += ratio;
    }
  }
  return o;
}

// Every allocation of up to `total` CPUs (each model at least its floor), by brute force: the
// best Objective, with "all met" only where some allocation meets every target.
Objective BruteForce(const std::vector<ModelDemand>& models, const Scored& s, int total) {
  const size_t n = models.size();
  std::vector<int> c(n);
  std::optional<Objective> best, best_met;
  std::function<void(size_t, int)> walk = [&](size_t i, int left) {
    if (i == n) {
      const Objective o = ObjectiveOf(models, s, c);
      if (!best || o < *best) best = o;
      if (o.all_met && (!best_met || o < *best_met)) best_met = o;
      return;
    }
    for (int k = models[i].min_threads; k <= left; ++k) {
      c[i] = k;
      walk(i + 1, left - k);
    }
  };
  walk(0, total);
  EXPECT_TRUE(best.has_value());
  return best_met ? *best_met : *best;
}

TEST(JointPartitionTest, TwoIdenticalModelsAtEqualRatesSplitEvenly) {
  const Optimizer a(AmdahlProfile(16, 8, 5, 40, 0.05));
  const Optimizer b(AmdahlProfile(16, 8, 5, 40, 0.05));
  JointPartition partition;
  const std::vector<ModelDemand> models{Demand("a", a, 30), Demand("b", b, 30)};
  auto envelope = partition.Envelope(models[0], 16);
  ASSERT_TRUE(envelope.ok());
  ASSERT_GT(P99((*envelope)[7]), P99((*envelope)[8]));  // 8 CPUs help: a breakpoint
  auto r = partition.Solve(models, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->models[0].cpus, 8);
  EXPECT_EQ(r->models[1].cpus, 8);
  EXPECT_DOUBLE_EQ(r->models[0].ratio, r->models[1].ratio);
  EXPECT_EQ(r->models[0].plan, r->models[1].plan);
  EXPECT_DOUBLE_EQ(r->models[0].p99_ms, P99((*envelope)[8]));
  EXPECT_EQ(r->spare_cpus, 0);
  EXPECT_TRUE(r->all_met);
}

TEST(JointPartitionTest, AnIdleModelKeepsItsFloorAndTheBusyOneGetsTheRest) {
  const Optimizer optimizer(AmdahlProfile(16, 8, 5, 40, 0.05));
  JointPartition partition;
  ModelDemand idle = Demand("idle", optimizer, 0);
  idle.min_threads = 2;
  idle.p99_target_ms = 1;  // no traffic: met whatever its plan takes
  const ModelDemand busy = Demand("busy", optimizer, 30);
  auto envelope = partition.Envelope(busy, 16);
  ASSERT_TRUE(envelope.ok());
  ASSERT_GT(P99((*envelope)[13]), P99((*envelope)[14]));
  auto r = partition.Solve({idle, busy}, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->models[0].cpus, 2);
  EXPECT_EQ(r->models[0].ratio, 0);
  EXPECT_TRUE(r->models[0].met);
  ASSERT_TRUE(r->models[0].plan.has_value());
  EXPECT_EQ(r->models[0].plan->batch, 1);  // its first request
  EXPECT_LE(r->models[0].plan->ThreadsUsed(), 2);
  EXPECT_DOUBLE_EQ(r->models[0].p99_ms, *optimizer.profile().Latency(2, 1));
  EXPECT_EQ(r->models[1].cpus, 14);
  EXPECT_DOUBLE_EQ(r->models[1].p99_ms, P99((*envelope)[14]));
  // Against its best with the node to itself.
  EXPECT_DOUBLE_EQ(r->models[1].reference_ms, P99((*envelope)[16]));
  EXPECT_DOUBLE_EQ(r->models[1].ratio, P99((*envelope)[14]) / P99((*envelope)[16]));
  EXPECT_EQ(r->spare_cpus, 0);
}

TEST(JointPartitionTest, CpusThatHelpNoModelStaySpare) {
  // One thread only: a model uses 1 CPU per instance and the rate needs few of them.
  const Optimizer optimizer(AmdahlProfile(1, 8, 5, 40, 0.05));
  JointPartition partition;
  auto r = partition.Solve({Demand("a", optimizer, 10)}, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto envelope = partition.Envelope(Demand("a", optimizer, 10), 16);
  ASSERT_TRUE(envelope.ok());
  const int used = r->models[0].cpus;
  EXPECT_LT(used, 16);
  EXPECT_DOUBLE_EQ(P99((*envelope)[static_cast<size_t>(used)]), P99((*envelope)[16]));
  EXPECT_GT(P99((*envelope)[static_cast<size_t>(used) - 1]), P99((*envelope)[16]));
  EXPECT_EQ(r->spare_cpus, 16 - used);
}

// Rule 6: a model that no CPU count sustains gets the CPUs nobody else needs, not its floor.
TEST(JointPartitionTest, AnOverloadedModelGetsTheSpareCpus) {
  const Optimizer optimizer(AmdahlProfile(1, 8, 5, 40, 0.05));  // ~170 rows/s per CPU at b = 8
  JointPartition partition;
  ModelDemand idle = Demand("idle", optimizer, 0);
  const ModelDemand flooded = Demand("flooded", optimizer, 1e6);
  auto r = partition.Solve({idle, flooded}, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->models[0].cpus, 1);
  EXPECT_EQ(r->models[1].cpus, 15);
  EXPECT_FALSE(r->models[1].sustained);
  ASSERT_TRUE(r->models[1].plan.has_value());
  EXPECT_EQ(r->models[1].plan->batch, 8);           // max_batch: the most rows per second
  EXPECT_LE(r->models[1].plan->ThreadsUsed(), 15);  // B = 8 rows: at most 8 instances here
  EXPECT_EQ(r->spare_cpus, 0);
  EXPECT_EQ(r->unsustained, 1);
  // Beside a busy model, the overloaded one gets all but the fewest CPUs that keep the busy one
  // up (alone, the busy one would take more, for a lower p99).
  const ModelDemand busy = Demand("busy", optimizer, 100);
  auto both = partition.Solve({busy, flooded}, 16);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  auto alone = partition.Solve({busy}, 16);
  ASSERT_TRUE(alone.ok());
  auto envelope = partition.Envelope(busy, 16);
  ASSERT_TRUE(envelope.ok());
  int fewest = 1;
  while (!(*envelope)[static_cast<size_t>(fewest)]) ++fewest;
  EXPECT_TRUE(both->models[0].sustained);
  EXPECT_EQ(both->models[0].cpus, fewest);
  EXPECT_EQ(both->models[1].cpus, 16 - fewest);
  EXPECT_TRUE(std::isinf(both->models[1].ratio));
  ASSERT_TRUE(both->models[1].plan.has_value());  // its max_batch plan on those CPUs
  EXPECT_EQ(both->models[1].plan->batch, 8);
}

// An on-off model between bursts: 1 row/s now, 60 at its recent peak, beside a busy one.
TEST(JointPartitionTest, AReserveForARecentPeakIsKeptWhereTheNodeHasRoom) {
  const Optimizer optimizer(AmdahlProfile(1, 8, 5, 40, 0.05));  // one thread: a CPU each
  JointPartition partition;
  ModelDemand between = Demand("between", optimizer, 1);
  between.peak = 60;
  const ModelDemand busy = Demand("busy", optimizer, 60);
  auto at_rates = partition.Solve({between, busy}, 16);
  ASSERT_TRUE(at_rates.ok());
  auto reserved = partition.SolveWithReserve({between, busy}, 16);
  ASSERT_TRUE(reserved.ok()) << reserved.status().ToString();
  EXPECT_EQ(reserved->reserve, PeakReserve::kPlanned);  // the node has room for both peaks
  EXPECT_GT(reserved->models[0].cpus, at_rates->models[0].cpus);
  EXPECT_EQ(reserved->models[0].cpus, reserved->models[1].cpus);  // two models alike
  EXPECT_EQ(reserved->unsustained, 0);
}

TEST(JointPartitionTest, WhereTheNodeHasNoRoomForTheReserveTheRatesWin) {
  const Optimizer optimizer(AmdahlProfile(1, 8, 5, 40, 0.05));
  JointPartition partition;
  ModelDemand between = Demand("between", optimizer, 1);
  between.peak = 60;
  const ModelDemand busy = Demand("busy", optimizer, 60);
  auto envelope = partition.Envelope(busy, 16);
  ASSERT_TRUE(envelope.ok());
  int fewest = 1;  // the fewest CPUs that keep the busy model up
  while (!(*envelope)[static_cast<size_t>(fewest)]) ++fewest;
  // One CPU more than the rates need: no room for the between model's peak (it needs what the
  // busy one does), and it holds no CPUs to keep.
  auto r = partition.SolveWithReserve({between, busy}, fewest + 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->unsustained, 0);
  EXPECT_EQ(r->reserve, PeakReserve::kNone);
  EXPECT_EQ(r->models[1].cpus, fewest);
  // Without a reserve: the rates alone.
  auto same = partition.SolveWithReserve({Demand("a", optimizer, 10), busy}, 16);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->reserve, PeakReserve::kNone);
}

// The fewest CPUs on which `model` sustains its rate (T + 1 where none of T does).
int Fewest(JointPartition& partition, const ModelDemand& model, int total) {
  auto envelope = partition.Envelope(model, total);
  EXPECT_TRUE(envelope.ok()) << envelope.status().ToString();
  int fewest = model.min_threads;
  while (fewest <= total && !(*envelope)[static_cast<size_t>(fewest)]) ++fewest;
  return fewest;
}

// Three models that the node cannot all sustain: the plain Solve leaves the fewest lacking,
// by taking the CPUs of the one that keeps up now to sustain the two that lack them.
// SolveWithReserve lets a model keep what its rate needs of the CPUs it holds (all of them for
// one that lacks CPUs): a move for one model never costs another the CPUs its rate needs.
TEST(JointPartitionTest, AModelThatKeepsUpKeepsWhatItsRateNeedsOfItsCpus) {
  const Optimizer optimizer(AmdahlProfile(1, 16, 5, 40, 0.05));  // one thread: a CPU each
  JointPartition partition;
  constexpr int kCpus = 12;
  ModelDemand a = Demand("a", optimizer, 120, 16);
  ModelDemand b = Demand("b", optimizer, 60, 16);
  ModelDemand c = Demand("c", optimizer, 60, 16);
  const int a_needs = Fewest(partition, a, kCpus);
  const int b_needs = Fewest(partition, b, kCpus);
  ASSERT_EQ(a_needs + b_needs, kCpus);  // a and one other fit, with nothing left for the third
  ASSERT_EQ(2 * b_needs, a_needs);      // b and c together need what a does
  a.held_cpus = a_needs;
  b.held_cpus = c.held_cpus = (kCpus - a_needs) / 2;
  ASSERT_LT(b.held_cpus, b_needs);
  EXPECT_EQ(partition.RateFloor(a), a_needs);
  EXPECT_EQ(partition.RateFloor(b), b.held_cpus);  // lacking: each CPU it holds adds capacity
  auto plain = partition.Solve({a, b, c}, kCpus);
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->unsustained, 1);
  ASSERT_FALSE(plain->models[0].sustained);  // the trade
  auto r = partition.SolveWithReserve({a, b, c}, kCpus);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->models[0].sustained);
  EXPECT_EQ(r->models[0].cpus, a_needs);
  EXPECT_EQ(r->unsustained, 2);
}

// An on-off model between bursts (1 row/s now, 150 at its recent peak) beside a busy one, where
// the node has no room to plan for the peak: it keeps the CPUs it holds up to what its peak
// needs, where the busy model's rate fits in the rest. The rates alone would leave it one.
TEST(JointPartitionTest, WithoutRoomForAReserveAModelKeepsWhatItsPeakNeedsOfItsCpus) {
  const Optimizer optimizer(AmdahlProfile(1, 16, 5, 40, 0.05));  // one thread: a CPU each
  JointPartition partition;
  constexpr int kCpus = 11;
  ModelDemand busy = Demand("busy", optimizer, 120, 16);
  const int busy_needs = Fewest(partition, busy, kCpus);
  ModelDemand at_peak = Demand("between", optimizer, 150, 16);
  const int peak_needs = Fewest(partition, at_peak, kCpus);
  ASSERT_GT(peak_needs + busy_needs, kCpus);  // no room to plan for the peak

  ModelDemand between = Demand("between", optimizer, 1, 16);
  between.peak = 150;
  between.held_cpus = kCpus - busy_needs;
  busy.held_cpus = 2;  // what it holds does not bound its growth
  EXPECT_EQ(partition.PeakFloor(between), between.held_cpus);  // all it holds: the peak needs more
  auto at_rates = partition.Solve({between, busy}, kCpus);
  ASSERT_TRUE(at_rates.ok());
  EXPECT_EQ(at_rates->models[0].cpus, 1);
  auto r = partition.SolveWithReserve({between, busy}, kCpus);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reserve, PeakReserve::kKept);
  EXPECT_EQ(r->unsustained, 0);
  EXPECT_EQ(r->models[0].cpus, between.held_cpus);
  EXPECT_EQ(r->models[1].cpus, busy_needs);

  // Holding more than its peak needs, it keeps only that much.
  between.peak = 60;
  between.held_cpus = kCpus - 1;
  const int sixty_needs = Fewest(partition, Demand("x", optimizer, 60, 16), kCpus);
  ASSERT_LT(sixty_needs, between.held_cpus);
  EXPECT_EQ(partition.PeakFloor(between), sixty_needs);
  // Where the busy model's rate does not fit beside what the peak needs, the rates win.
  between.peak = 150;
  between.held_cpus = kCpus - busy_needs + 2;
  auto rates_win = partition.SolveWithReserve({between, busy}, kCpus);
  ASSERT_TRUE(rates_win.ok());
  EXPECT_EQ(rates_win->reserve, PeakReserve::kNone);
  EXPECT_EQ(rates_win->unsustained, 0);
  EXPECT_EQ(rates_win->models[0].cpus, 1);
}

TEST(JointPartitionTest, TargetsThatCannotAllBeMetGiveTheLeastWorstRatio) {
  const Optimizer a(AmdahlProfile(16, 8, 5, 40, 0.05));
  const Optimizer b(AmdahlProfile(16, 8, 10, 60, 0.1));
  JointPartition partition;
  std::vector<ModelDemand> models{Demand("a", a, 30), Demand("b", b, 20)};
  models[0].p99_target_ms = 10;  // below either model's one-row latency on 16 threads
  models[1].p99_target_ms = 15;
  auto r = partition.Solve(models, 12);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->all_met);
  EXPECT_FALSE(r->models[0].met);
  EXPECT_FALSE(r->models[1].met);
  EXPECT_GT(r->worst_ratio, 1);
  const Objective brute = BruteForce(models, Score(partition, models, 12), 12);
  EXPECT_FALSE(brute.all_met);
  EXPECT_DOUBLE_EQ(r->worst_ratio, brute.worst);
  EXPECT_DOUBLE_EQ(r->ratio_sum, brute.sum);
}

TEST(JointPartitionTest, TargetsThatCanBeMetComeBeforeTheWorstRatio) {
  const Optimizer a(AmdahlProfile(16, 8, 5, 40, 0.05));
  const Optimizer b(AmdahlProfile(16, 8, 5, 40, 0.05));
  JointPartition partition;
  std::vector<ModelDemand> models{Demand("heavy", a, 30), Demand("targeted", b, 30)};
  models[0].weight = 10;  // its ratio is ≥ 10: minimising the worst alone gives it all it uses
  auto envelope = partition.Envelope(models[1], 16);
  ASSERT_TRUE(envelope.ok());
  // A target the second model meets only from 6 CPUs on.
  models[1].p99_target_ms = P99((*envelope)[6]);
  ASSERT_GT(P99((*envelope)[5]), *models[1].p99_target_ms);
  auto r = partition.Solve(models, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->all_met);
  EXPECT_EQ(r->models[1].cpus, 6);
  EXPECT_EQ(r->models[0].cpus, 10);
  models[1].p99_target_ms.reset();
  auto untargeted = partition.Solve(models, 16);
  ASSERT_TRUE(untargeted.ok());
  EXPECT_LT(untargeted->models[1].cpus, 6);
}

TEST(JointPartitionTest, AWeightShiftsCpus) {
  const Optimizer a(AmdahlProfile(16, 8, 5, 40, 0.05));
  const Optimizer b(AmdahlProfile(16, 8, 5, 40, 0.05));
  JointPartition partition;
  std::vector<ModelDemand> models{Demand("a", a, 30), Demand("b", b, 30)};
  models[1].weight = 1.5;
  auto r = partition.Solve(models, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->models[1].cpus, r->models[0].cpus);
  EXPECT_DOUBLE_EQ(r->models[1].ratio, 1.5 * r->models[1].p99_ms / r->models[1].reference_ms);
}

TEST(JointPartitionTest, FloorsBeyondTheNodeAndBadDemandsAreErrors) {
  const Optimizer optimizer(AmdahlProfile(4, 8, 5, 40, 0.05));
  JointPartition partition;
  ModelDemand a = Demand("a", optimizer, 10);
  ModelDemand b = Demand("b", optimizer, 0);
  a.min_threads = 3;
  b.min_threads = 3;
  auto r = partition.Solve({a, b}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("a 3, b 3"), std::string::npos) << r.status().message();
  EXPECT_TRUE(partition.Solve({a, b}, 6).ok());

  EXPECT_EQ(partition.Solve({a}, 0).status().code(), StatusCode::kInvalidArgument);
  const auto invalid = [&](const std::function<void(ModelDemand*)>& breaks) {
    ModelDemand d = Demand("broken", optimizer, 10);
    breaks(&d);
    const Status s = partition.Solve({d}, 8).status();
    return s.code() == StatusCode::kInvalidArgument &&
           s.message().find("'broken'") != std::string::npos;
  };
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->optimizer = nullptr; }));
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->rate = -1; }));
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->weight = 0; }));
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->p99_target_ms = 0; }));
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->min_threads = 0; }));
  EXPECT_TRUE(invalid([](ModelDemand* d) { d->max_utilization = 1.5; }));
}

TEST(JointPartitionTest, ExactAgainstBruteForceOnEightCpus) {
  const auto resnet = Published("resnet50");
  const auto inception = Published("inception-v3");
  const auto bert = Published("bert-base");
  JointPartition partition;
  struct Case {
    double rates[3];
    std::optional<double> targets[3];
    double weights[3];
    int floors[3];
  };
  const std::vector<Case> cases{
      {{20, 15, 10}, {}, {1, 1, 1}, {1, 1, 1}},
      {{40, 30, 25}, {}, {1, 2, 1}, {1, 1, 1}},
      {{20, 15, 10}, {std::nullopt, 200.0, 300.0}, {1, 1, 1}, {1, 1, 2}},
      {{60, 0, 30}, {80.0, std::nullopt, 100.0}, {1, 1, 3}, {1, 2, 1}},
      {{80, 60, 50}, {}, {1, 1, 1}, {1, 1, 1}},  // more than 8 CPUs serve
      {{20, 15, 10}, {100.0, std::nullopt, std::nullopt}, {1, 1, 1}, {1, 1, 1}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::vector<ModelDemand> models{Demand("resnet", *resnet, c.rates[0]),
                                    Demand("inception", *inception, c.rates[1]),
                                    Demand("bert", *bert, c.rates[2])};
    for (size_t i = 0; i < 3; ++i) {
      models[i].p99_target_ms = c.targets[i];
      models[i].weight = c.weights[i];
      models[i].min_threads = c.floors[i];
    }
    auto r = partition.Solve(models, 8);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Scored scored = Score(partition, models, 8);
    std::vector<int> cpus;
    for (const ModelShare& m : r->models) cpus.push_back(m.cpus);
    const Objective got = ObjectiveOf(models, scored, cpus);
    const Objective want = BruteForce(models, scored, 8);
    EXPECT_EQ(got.all_met, want.all_met) << "case " << k;
    EXPECT_EQ(got.unsustained, want.unsustained) << "case " << k;
    EXPECT_DOUBLE_EQ(got.worst, want.worst) << "case " << k;
    EXPECT_DOUBLE_EQ(got.sum, want.sum) << "case " << k;
    EXPECT_EQ(got.cpus, want.cpus) << "case " << k;
    EXPECT_EQ(r->cpus_assigned + r->spare_cpus, 8);
  }
}

TEST(JointPartitionTest, TheEnvelopeIsTheBestOfTheRuleOnFewerCpus) {
  const auto resnet = Published("resnet50");
  const auto gpt2 = Published("gpt2");
  JointPartition partition;
  {
    for (const auto& [optimizer, rate] : {std::pair{resnet.get(), 60.0}, {gpt2.get(), 25.0}}) {
      ModelDemand d = Demand("m", *optimizer, rate, 16);
      d.min_threads = 2;
      auto envelope = partition.Envelope(d, 16);
      ASSERT_TRUE(envelope.ok()) << envelope.status().ToString();
      EXPECT_FALSE((*envelope)[1].has_value());  // below the floor
      double best = kInf;
      for (int c = 2; c <= 16; ++c) {
        auto at = partition.PolicyAt(d, c);
        ASSERT_TRUE(at.ok());
        const auto& e = (*envelope)[static_cast<size_t>(c)];
        if (P99(*at) < best) {  // a breakpoint: the rule's own plan for c
          best = P99(*at);
          ASSERT_TRUE(e.has_value());
          EXPECT_EQ(e->cpus, c);
          EXPECT_EQ(e->plan, (*at)->plan);
        }
        EXPECT_EQ(P99(e), best) << "c=" << c;
        EXPECT_LE(P99(e), P99((*envelope)[static_cast<size_t>(c) - 1]));
        if (e) {
          EXPECT_LE(e->plan.ThreadsUsed(), c);
        }
      }
    }
  }
}

TEST(JointPartitionTest, KeepUpIsBatchForRatesBatchOnTheOptimizersPlan) {
  const auto bert = Published("bert-base");
  const BatchingSimulator simulator;
  const PlanEvaluator eval(*bert, simulator, {});
  JointPartitionOptions policy_draws;
  policy_draws.simulated_requests = 5000;  // the estimates on the policy's own simulator
  JointPartition partition(policy_draws);
  JointPartition estimates;  // 1000 draws: the same plans, other p99 estimates
  const double rate = 40;
  for (int c = 1; c <= 16; ++c) {
    const std::optional<int64_t> b = BatchForRate(rate, 0, 64, 0.8, [&](int64_t b) {
      auto plan = bert->Solve(c, static_cast<int>(b));
      return plan.ok() ? std::optional<double>(eval.Capacity(*plan)) : std::nullopt;
    });
    std::optional<Plan> want;
    if (b) {
      auto plan = bert->Solve(c, static_cast<int>(*b));
      if (plan.ok() && rate <= 0.8 * eval.Capacity(*plan)) want = *plan;
    }
    auto got = partition.PolicyAt(Demand("bert", *bert, rate, 64), c);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->has_value(), want.has_value()) << "c=" << c;
    if (!want) continue;
    EXPECT_EQ((*got)->plan, *want);
    EXPECT_EQ((*got)->simulated.p99_ms, eval.SimulatedP99Ms(*want, rate));
    auto estimated = estimates.PolicyAt(Demand("bert", *bert, rate, 64), c);
    ASSERT_TRUE(estimated.ok() && estimated->has_value());
    EXPECT_EQ((*estimated)->plan, *want);
  }
}

TEST(JointPartitionTest, PublishedProfilesShareSixteenCores) {
  const auto resnet = Published("resnet50");
  const auto inception = Published("inception-v3");
  const auto bert = Published("bert-base");
  const auto gpt2 = Published("gpt2");
  std::vector<ModelDemand> models{
      Demand("resnet50", *resnet, 60, 64), Demand("inception-v3", *inception, 40, 64),
      Demand("bert-base", *bert, 30, 64), Demand("gpt2", *gpt2, 20, 64)};
  JointPartition partition;
  auto r = partition.Solve(models, 16);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpus_assigned + r->spare_cpus, 16);
  EXPECT_EQ(r->unsustained, 0);
  double worst = 0;
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelShare& s = r->models[i];
    SCOPED_TRACE(models[i].name);
    EXPECT_GE(s.cpus, 1);
    ASSERT_TRUE(s.plan.has_value());
    EXPECT_LE(s.plan->ThreadsUsed(), s.cpus);
    EXPECT_TRUE(std::isfinite(s.p99_ms));
    EXPECT_GE(s.ratio, 1.0);  // untargeted: against its best with all 16 CPUs
    worst = std::max(worst, s.ratio);
    // What its own policy serves on its CPUs.
    auto own = partition.PolicyAt(models[i], s.cpus);
    ASSERT_TRUE(own.ok() && own->has_value());
    EXPECT_EQ((*own)->plan, *s.plan);
    EXPECT_EQ((*own)->simulated.p99_ms, s.p99_ms);
  }
  EXPECT_EQ(r->worst_ratio, worst);
  // A model given all 16 CPUs alone reaches its reference; sharing costs every model.
  EXPECT_GT(r->worst_ratio, 1.0);
  // A fresh instance (cold caches) decides the same.
  JointPartition fresh;
  auto again = fresh.Solve(models, 16);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < models.size(); ++i) {
    EXPECT_EQ(again->models[i].cpus, r->models[i].cpus);
    EXPECT_EQ(again->models[i].plan, r->models[i].plan);
  }
}

TEST(JointPartitionTest, PlansAreCachedAcrossRates) {
  const auto resnet = Published("resnet50");
  JointPartition partition;
  std::vector<ModelDemand> models{Demand("a", *resnet, 50, 32), Demand("b", *resnet, 20, 32)};
  ASSERT_TRUE(partition.Solve(models, 16).ok());
  const size_t cached = partition.CachedPlanCount();
  EXPECT_GT(cached, 0u);
  models[0].rate = 52;
  models[1].rate = 21;
  auto warm = partition.Solve(models, 16);
  ASSERT_TRUE(warm.ok());
  EXPECT_LE(partition.CachedPlanCount(), cached + cached / 4);
  JointPartition fresh;
  auto cold = fresh.Solve(models, 16);
  ASSERT_TRUE(cold.ok());
  for (size_t i = 0; i < models.size(); ++i) {
    EXPECT_EQ(warm->models[i].cpus, cold->models[i].cpus);
    EXPECT_EQ(warm->models[i].p99_ms, cold->models[i].p99_ms);
  }
  EXPECT_EQ(warm->stats.simulations, cold->stats.simulations);
  partition.Forget(resnet.get());
  EXPECT_EQ(partition.CachedPlanCount(), 0u);
}

}  // namespace
}  // namespace packrat
