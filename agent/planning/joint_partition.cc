#include "agent/planning/joint_partition.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <tuple>
#include <utility>

#include "agent/planning/batch_for_rate.h"

namespace packrat {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The ratio floor of a model that no CPU count sustains (above any sustained model's ratio).
constexpr double kOverloaded = 1e6;

// A request's simulated latency is a difference of times, which may round a few ulps below the
// slice it waited for; the lower bounds on p99 keep this far below theirs.
constexpr double kBoundMargin = 1 - 1e-9;

std::string Quoted(const ModelDemand& m) { return "model '" + m.name + "'"; }

Status CheckDemand(const ModelDemand& m) {
  if (m.optimizer == nullptr) return InvalidArgument(Quoted(m) + ": no optimizer");
  if (!(m.rate >= 0) || !std::isfinite(m.rate)) {
    return InvalidArgument(Quoted(m) + ": rate must be finite and >= 0");
  }
  if (m.p99_target_ms && !(*m.p99_target_ms > 0 && std::isfinite(*m.p99_target_ms))) {
    return InvalidArgument(Quoted(m) + ": p99_target_ms must be finite and > 0");
  }
  if (!(m.weight > 0) || !std::isfinite(m.weight)) {
    return InvalidArgument(Quoted(m) + ": weight must be finite and > 0");
  }
  if (m.min_threads < 1) return InvalidArgument(Quoted(m) + ": min_threads must be >= 1");
  if (m.max_batch < 1 || m.max_batch > (int64_t{1} << 20)) {
    return InvalidArgument(Quoted(m) + ": max_batch must be between 1 and 1048576");
  }
  if (!(m.max_utilization > 0 && m.max_utilization <= 1)) {
    return InvalidArgument(Quoted(m) + ": max_utilization must be in (0, 1]");
  }
  return Status::Ok();
}

Status CheckCpus(int cpus, std::string_view what) {
  if (cpus < 1 || cpus > JointPartition::kMaxCpus) {
    return InvalidArgument(std::string(what) + " must be between 1 and " +
                           std::to_string(JointPartition::kMaxCpus) + ", got " +
                           std::to_string(cpus));
  }
  return Status::Ok();
}

// The DP's additive key (objectives 2, 4, 5), compared lexicographically.
struct Key {
  int unsustained = 0;
  double ratio_sum = 0;
  int cpus = 0;

  bool operator<(const Key& o) const {
    return std::tie(unsustained, ratio_sum, cpus) < std::tie(o.unsustained, o.ratio_sum, o.cpus);
  }
};

// One breakpoint of a model's envelope the DP may pick.
struct Option {
  int cpus = 0;
  double p99_ms = kInf;
  double ratio = kInf;
};

// The least-key allocation that picks one option per model, each with ratio ≤ `theta` or
// infinite, within `total` CPUs: the option index per model, or nullopt if none fits.
// O(models · total · options).
std::optional<std::vector<int>> Allocate(const std::vector<std::vector<Option>>& options,
                                         double theta, int total, Key* key) {
  const size_t width = static_cast<size_t>(total) + 1;
  std::vector<std::optional<Key>> cur(width), next(width);
  cur[0] = Key{};
  std::vector<int> parent(options.size() * width, -1);
  for (size_t m = 0; m < options.size(); ++m) {
    std::fill(next.begin(), next.end(), std::nullopt);
    for (size_t c = 0; c < width; ++c) {
      if (!cur[c]) continue;
      for (size_t k = 0; k < options[m].size(); ++k) {
        const Option& o = options[m][k];
        const bool infinite = std::isinf(o.ratio);
        if (!infinite && o.ratio > theta) continue;
        const size_t to = c + static_cast<size_t>(o.cpus);
        if (to >= width) break;  // options ascend by cpus
        Key k2 = *cur[c];
        k2.unsustained += infinite ? 1 : 0;
        k2.ratio_sum += infinite ? 0 : o.ratio;
        k2.cpus += o.cpus;
        if (!next[to] || k2 < *next[to]) {
          next[to] = k2;
          parent[m * width + to] = static_cast<int>(k);
        }
      }
    }
    std::swap(cur, next);
  }
  std::optional<size_t> end;
  for (size_t c = 0; c < width; ++c) {
    if (cur[c] && (!end || *cur[c] < *cur[*end])) end = c;
  }
  if (!end) return std::nullopt;
  *key = *cur[*end];
  std::vector<int> picked(options.size());
  for (size_t m = options.size(), c = *end; m-- > 0;) {
    picked[m] = parent[m * width + c];
    c -= static_cast<size_t>(options[m][static_cast<size_t>(picked[m])].cpus);
  }
  return picked;
}

}  // namespace

// The rate-independent part of the rule for one profile: the optimizer's plan per ⟨c,B⟩,
// computed on first use and kept. Every distinct ⟨B, groups⟩ — what a simulation depends on — has
// an id.
struct JointPartition::Plans {
  struct Entry {
    Plan plan;
    int id = 0;
  };
  struct Cell {
    std::optional<Entry> best;  // Optimizer::Solve(c, B); nullopt: no plan
  };

  explicit Plans(Profile p) : profile(std::move(p)) {
    for (const ProfilePoint& point : profile.points()) {
      batches[point.threads].push_back(point.batch);  // points are sorted by (threads, batch)
    }
  }

  int IdOf(const Plan& plan) {
    std::vector<int> key{plan.batch};
    for (const InstanceGroup& g : plan.groups) key.insert(key.end(), {g.count, g.threads, g.batch});
    return ids.try_emplace(std::move(key), static_cast<int>(ids.size())).first->second;
  }

  // The optimizer's plan for ⟨cpus, batch⟩.
  const Cell& At(const Optimizer& optimizer, int cpus, int batch) {
    auto [it, inserted] = cells.try_emplace({cpus, batch});
    Cell& cell = it->second;
    if (inserted) {
      StatusOr<Plan> best = optimizer.Solve(cpus, batch);
      if (best.ok()) {
        const int id = IdOf(*best);
        cell.best = Entry{*std::move(best), id};
      }
    }
    return cell;
  }

  const Profile profile;
  std::map<int, std::vector<int>> batches;    // profiled batch sizes per thread count, ascending
  std::map<std::vector<int>, int> ids;        // ⟨B, groups⟩ -> id
  std::map<std::pair<int, int>, Cell> cells;  // ⟨c, B⟩
};

// One model at its rate: the figures of each plan (by id) computed at most once.
struct JointPartition::Pass {
  struct Found {
    const Plans::Entry* entry = nullptr;
    double p99_ms = kInf;
    int cpus = 0;  // the budget the rule planned it for
  };

  // `policy`: the policy's simulator, for every choice the rules make; `estimate`: the one the
  // keep-up rule's p99 comes from.
  Pass(const ModelDemand& d, Plans& p, const BatchingSimulator& policy,
       const BatchingSimulator& estimate, PartitionResult::Stats* s)
      : demand(d),
        plans(p),
        eval(*d.optimizer, policy, d.evaluation, d.slowdown),
        estimate_eval(*d.optimizer, estimate, d.evaluation, d.slowdown),
        stats(s) {}

  template <typename T>
  static T& Slot(std::vector<T>& memo, int id, T empty) {
    if (memo.size() <= static_cast<size_t>(id)) memo.resize(static_cast<size_t>(id) + 1, empty);
    return memo[static_cast<size_t>(id)];
  }

  // The fastest and slowest slice a plan's instances can run: an instance's latency for 1..b
  // rows at its slowdown, as the simulator interpolates it (linear between profiled batch
  // sizes, proportional outside them), whose extremes lie at 1, at b or at a profiled batch
  // size between. The profiles are not monotone in b (GPT-2: 133 ms for one row on one thread,
  // 123 for two). No request is answered faster than the fastest (so it bounds p99 from
  // below), and every batch takes between the two.
  struct SliceRange {
    double fastest = -1;  // < 0: not computed
    double slowest = 0;
  };
  const SliceRange& Slices(const Plans::Entry& e) {
    SliceRange& range = Slot(slices, e.id, SliceRange{});
    if (range.fastest >= 0) return range;
    ++stats->plans_bounded;
    const Profile& profile = eval.profile();
    range.fastest = kInf;
    for (const InstanceGroup& g : e.plan.groups) {
      const double slowdown = eval.Slowdown(g.threads);
      auto take = [&](int64_t rows) {
        const double ms =
            profile.InterpolatedLatency(g.threads, rows).value_or(e.plan.latency_ms) * slowdown;
        range.fastest = std::min(range.fastest, ms);
        range.slowest = std::max(range.slowest, ms);
      };
      take(1);
      take(g.batch);
      if (auto it = plans.batches.find(g.threads); it != plans.batches.end()) {
        for (int b : it->second) {
          if (b > g.batch) break;
          take(b);
        }
      }
    }
    return range;
  }
  double LowerBound(const Plans::Entry& e) { return Slices(e).fastest * kBoundMargin; }

  // LoadedLatencyMs at full batches, as PlanEvaluator::Capacity takes it.
  double FullMs(const Plans::Entry& e) {
    double& full = Slot(full_ms, e.id, -1.0);
    if (full < 0) full = eval.PredictedLatencyMs(e.plan);
    return full;
  }

  // The plan's requests at the rate on the policy's simulator.
  const BatchingSimulator::Result& PolicySimulated(const Plans::Entry& e) {
    std::optional<BatchingSimulator::Result>& result = Slot(policy_runs, e.id, {});
    if (!result) {
      ++stats->simulations;
      result = eval.Simulate(e.plan, demand.rate);
    }
    return *result;
  }

  // ... on the simulator the rule's p99 comes from.
  const BatchingSimulator::Result& Simulated(const Plans::Entry& e) {
    std::optional<BatchingSimulator::Result>& result = Slot(estimate_runs, e.id, {});
    if (!result) {
      ++stats->simulations;
      result = estimate_eval.Simulate(e.plan, demand.rate);
    }
    return *result;
  }

  // Whether the plan's simulated batches break the batch-latency limit (PlanEvaluator::TooSlow
  // on mean_batch_ms), simulating only where the slice range leaves it open.
  bool TooSlow(const Plans::Entry& e) {
    const double limit = demand.evaluation.max_batch_latency_ms;
    if (limit <= 0) return false;
    const SliceRange& range = Slices(e);
    if (range.slowest * (2 - kBoundMargin) <= limit) return false;
    if (range.fastest * kBoundMargin > limit) return true;
    return eval.TooSlow(PolicySimulated(e).mean_batch_ms);
  }

  std::optional<Found> RuleBelow(int cpus, double bar) {
    ++stats->rule_evaluations;
    return KeepUpBelow(cpus, bar);
  }

  // The keep-up rule's plan on `cpus` CPUs if its p99 is below `bar`: BatchForRate's B from
  // nothing (the smallest B whose optimizer plan, within the batch-latency limit, runs the rate
  // at most max_utilization busy) and that plan. One plan per ⟨c⟩, simulated only where its
  // lower bound is below the bar.
  std::optional<Found> KeepUpBelow(int cpus, double bar) {
    const double rate = demand.rate;
    const double max_utilization = demand.max_utilization;
    std::map<int64_t, const Plans::Entry*> plan_for;
    const auto keeps_up = [&](const Plans::Entry& e) {
      return !(rate > max_utilization * eval.Capacity(e.plan));
    };
    const std::optional<int64_t> b = BatchForRate(
        rate, 0, demand.max_batch, max_utilization, [&](int64_t b) -> std::optional<double> {
          const Plans::Cell& cell = plans.At(*demand.optimizer, cpus, static_cast<int>(b));
          if (!cell.best) return std::nullopt;
          // The limit matters only where the plan keeps up: elsewhere it is never the answer.
          if (keeps_up(*cell.best) && TooSlow(*cell.best)) return std::nullopt;
          plan_for[b] = &*cell.best;
          const double full = FullMs(*cell.best);
          return full > 0 ? static_cast<double>(b) * 1e3 / full : kInf;
        });
    if (!b || plan_for.count(*b) == 0) return std::nullopt;
    const Plans::Entry& chosen = *plan_for[*b];
    // BatchForRate's fallback (nothing keeps up) is a B that does not.
    if (!keeps_up(chosen) || LowerBound(chosen) >= bar) return std::nullopt;
    const double p99 = Simulated(chosen).p99_ms;
    if (!(p99 < bar)) return std::nullopt;
    return Found{&chosen, p99, cpus};
  }

  // The envelope for c = 0..max_cpus (nullopt below the floor and where nothing sustains).
  std::vector<std::optional<Found>> Scan(int max_cpus) {
    std::vector<std::optional<Found>> envelope(static_cast<size_t>(max_cpus) + 1);
    std::optional<Found> so_far;
    for (int c = demand.min_threads; c <= max_cpus; ++c) {
      if (auto found = RuleBelow(c, so_far ? so_far->p99_ms : kInf)) so_far = found;
      envelope[static_cast<size_t>(c)] = so_far;
    }
    return envelope;
  }

  const ModelDemand& demand;
  Plans& plans;
  const PlanEvaluator eval;           // on the policy's simulator
  const PlanEvaluator estimate_eval;  // on the estimates' simulator
  PartitionResult::Stats* stats;
  std::vector<SliceRange> slices;                                       // by id
  std::vector<double> full_ms;                                          // by id; < 0: not computed
  std::vector<std::optional<BatchingSimulator::Result>> policy_runs;    // by id
  std::vector<std::optional<BatchingSimulator::Result>> estimate_runs;  // by id
};

JointPartition::JointPartition(JointPartitionOptions options)
    : estimate_simulator_(options.simulated_requests) {}
JointPartition::~JointPartition() = default;

JointPartition::Plans& JointPartition::PlansFor(const Optimizer& optimizer) {
  std::unique_ptr<Plans>& plans = plans_[&optimizer];
  // Another Optimizer may have taken a destroyed one's address: plans follow the profile.
  if (!plans || plans->profile != optimizer.profile()) {
    plans = std::make_unique<Plans>(optimizer.profile());
  }
  return *plans;
}

void JointPartition::Forget(const Optimizer* optimizer) { plans_.erase(optimizer); }

size_t JointPartition::CachedPlanCount() const {
  size_t n = 0;
  for (const auto& [optimizer, plans] : plans_) n += plans->ids.size();
  return n;
}

StatusOr<std::optional<RatePlan>> JointPartition::PolicyAt(const ModelDemand& model, int cpus) {
  RETURN_IF_ERROR(CheckDemand(model));
  RETURN_IF_ERROR(CheckCpus(cpus, "cpus"));
  if (model.rate <= 0) return InvalidArgument(Quoted(model) + ": the rule needs a rate > 0");
  PartitionResult::Stats stats;
  Pass pass(model, PlansFor(*model.optimizer), policy_simulator_, estimate_simulator_, &stats);
  const std::optional<Pass::Found> found = pass.RuleBelow(cpus, kInf);
  if (!found) return std::optional<RatePlan>();
  return std::optional<RatePlan>(RatePlan{cpus, found->entry->plan, pass.Simulated(*found->entry)});
}

StatusOr<std::vector<std::optional<RatePlan>>> JointPartition::Envelope(const ModelDemand& model,
                                                                        int max_cpus) {
  RETURN_IF_ERROR(CheckDemand(model));
  RETURN_IF_ERROR(CheckCpus(max_cpus, "max_cpus"));
  if (model.rate <= 0) return InvalidArgument(Quoted(model) + ": the rule needs a rate > 0");
  if (max_cpus < model.min_threads) {
    return InvalidArgument(Quoted(model) + ": max_cpus is below min_threads");
  }
  PartitionResult::Stats stats;
  Pass pass(model, PlansFor(*model.optimizer), policy_simulator_, estimate_simulator_, &stats);
  const std::vector<std::optional<Pass::Found>> scanned = pass.Scan(max_cpus);
  std::vector<std::optional<RatePlan>> envelope(scanned.size());
  for (size_t c = 0; c < scanned.size(); ++c) {
    if (const std::optional<Pass::Found>& found = scanned[c]) {
      envelope[c] = RatePlan{found->cpus, found->entry->plan, pass.Simulated(*found->entry)};
    }
  }
  return envelope;
}

namespace {

// The models' floors: their sum, or kResourceExhausted naming each where they exceed `total`.
StatusOr<int64_t> SumFloors(const std::vector<ModelDemand>& models, int total) {
  int64_t floors = 0;
  for (const ModelDemand& m : models) floors += m.min_threads;
  if (floors <= total) return floors;
  std::string each;
  for (const ModelDemand& m : models) {
    each += (each.empty() ? "" : ", ") + m.name + " " + std::to_string(m.min_threads);
  }
  return ResourceExhausted("the models' min_threads add up to " + std::to_string(floors) +
                           " CPUs (" + each + "), more than the node's " + std::to_string(total));
}

// An overloaded model's options (no CPU count keeps up): its ratio is kOverloaded plus its load
// per unit of capacity (rate over the rows/s of the optimizer's plan for max_batch on c CPUs),
// so that it is every allocation's worst and falls with each CPU it gets: the others keep what
// sustains them at the least worst ratio below that, and it gets the rest.
std::vector<Option> OverloadedOptions(const ModelDemand& m, const PlanEvaluator& eval, int most) {
  std::vector<Option> options;
  double last = kInf;
  for (int c = m.min_threads; c <= most; ++c) {
    StatusOr<Plan> plan = m.optimizer->Solve(c, static_cast<int>(m.max_batch));
    const double capacity = plan.ok() ? eval.Capacity(*plan) : 0;
    if (!(capacity > 0)) continue;
    const double ratio = kOverloaded + m.weight * m.rate / capacity;
    if (!(ratio < last)) continue;
    options.push_back(Option{c, kInf, ratio});
    last = ratio;
  }
  if (options.empty()) options.push_back(Option{m.min_threads, kInf, kInf});
  return options;
}

// Rule 1: targeted models keep only their options within target, where that fits for all.
void KeepWithinTargets(const std::vector<ModelDemand>& models, int total,
                       std::vector<std::vector<Option>>* options) {
  int64_t needed = 0;
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelDemand& m = models[i];
    if (m.rate <= 0 || !m.p99_target_ms) {
      needed += m.min_threads;
      continue;
    }
    const auto& own = (*options)[i];
    auto first = std::find_if(own.begin(), own.end(),
                              [&](const Option& o) { return o.p99_ms <= *m.p99_target_ms; });
    if (first == own.end()) return;
    needed += first->cpus;
  }
  if (needed > total) return;
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelDemand& m = models[i];
    if (m.rate <= 0 || !m.p99_target_ms) continue;
    std::erase_if((*options)[i], [&](const Option& o) { return !(o.p99_ms <= *m.p99_target_ms); });
  }
}

// Rules 2-5: the fewest unsustained models, then the least θ that keeps them fewest, then the
// least-key allocation within θ. Nullopt where nothing fits (the floors fit: unreached).
std::optional<std::vector<int>> LeastWorst(const std::vector<std::vector<Option>>& options,
                                           int total) {
  Key key;
  std::optional<std::vector<int>> picked = Allocate(options, kInf, total, &key);
  if (!picked) return std::nullopt;
  const int fewest_unsustained = key.unsustained;
  std::vector<double> thetas;
  for (const auto& model_options : options) {
    for (const Option& o : model_options) {
      if (!std::isinf(o.ratio)) thetas.push_back(o.ratio);
    }
  }
  std::sort(thetas.begin(), thetas.end());
  thetas.erase(std::unique(thetas.begin(), thetas.end()), thetas.end());
  size_t low = 0, high = thetas.size();  // the answer is in [low, high]; high: θ = ∞
  while (low < high) {
    const size_t mid = (low + high) / 2;
    Key k;
    if (Allocate(options, thetas[mid], total, &k) && k.unsustained == fewest_unsustained) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  if (low < thetas.size()) picked = Allocate(options, thetas[low], total, &key);
  return picked;
}

// Rule 6: CPUs no model's choice needs go to the models no CPU count sustains (`overloaded`:
// an overload, or measured slowdowns beyond the profile), evenly, up to what each may get
// (`most`): there every CPU is capacity. The extra CPUs per model.
std::vector<int> SpareToOverloaded(const std::vector<Option>& chosen,
                                   const std::vector<bool>& overloaded,
                                   const std::vector<int>& most, int total) {
  std::vector<int> extra(chosen.size(), 0);
  int spare = total;
  for (const Option& o : chosen) spare -= o.cpus;
  for (bool gave = true; spare > 0 && gave;) {
    gave = false;
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (!overloaded[i] || spare == 0 || chosen[i].cpus + extra[i] >= most[i]) continue;
      ++extra[i];
      --spare;
      gave = true;
    }
  }
  return extra;
}

// The result's figures from each model's share.
void Summarize(int total, PartitionResult* result) {
  result->all_met = true;
  for (const ModelShare& share : result->models) {
    result->cpus_assigned += share.cpus;
    result->all_met = result->all_met && share.met;
    result->unsustained += share.sustained ? 0 : 1;
    result->worst_ratio = std::max(result->worst_ratio, share.ratio);
    if (!std::isinf(share.ratio)) result->ratio_sum += share.ratio;
  }
  result->spare_cpus = total - result->cpus_assigned;
}

}  // namespace

std::string_view PeakReserveName(PeakReserve reserve) {
  static constexpr std::string_view kNames[] = {"none", "planned", "kept"};
  static_assert(std::size(kNames) == static_cast<size_t>(PeakReserve::kKept) + 1);
  return kNames[static_cast<size_t>(reserve)];
}

StatusOr<PartitionResult> JointPartition::SolveWithReserve(const std::vector<ModelDemand>& models,
                                                           int total_cpus) {
  // Each model keeps what its rate needs of what it holds.
  std::vector<ModelDemand> floored = models;
  for (ModelDemand& d : floored) d.min_threads = RateFloor(d);
  StatusOr<PartitionResult> at_rates = Solve(floored, total_cpus);
  if (!at_rates.ok()) {
    floored = models;
    at_rates = Solve(models, total_cpus);
    if (!at_rates.ok()) return at_rates;
  }
  // Every model that the rates sustain keeps its rate now on its share.
  const auto room = [&](const StatusOr<PartitionResult>& reserved) {
    if (!reserved.ok() || reserved->unsustained > at_rates->unsustained) return false;
    for (size_t i = 0; i < models.size(); ++i) {
      const int cpus = reserved->models[i].cpus;
      if (models[i].rate <= 0 || !at_rates->models[i].sustained || cpus <= 0) continue;
      const auto envelope = Envelope(models[i], cpus);
      if (!envelope.ok() || !(*envelope)[static_cast<size_t>(cpus)]) return false;
    }
    return true;
  };
  // 1. The peaks, planned for.
  std::vector<ModelDemand> peaks = floored;
  bool any = false;
  for (ModelDemand& d : peaks) {
    any = any || d.peak > d.rate;
    d.rate = std::max(d.rate, d.peak);
  }
  if (!any) return at_rates;
  StatusOr<PartitionResult> planned = Solve(peaks, total_cpus);
  if (room(planned)) {
    planned->reserve = PeakReserve::kPlanned;
    return planned;
  }
  // 2. What each peak needs of the CPUs its model holds.
  std::vector<ModelDemand> kept = floored;
  any = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    kept[i].min_threads = std::max(floored[i].min_threads, PeakFloor(models[i]));
    any = any || kept[i].min_threads > floored[i].min_threads;
  }
  if (!any) return at_rates;
  StatusOr<PartitionResult> result = Solve(kept, total_cpus);
  if (room(result)) {
    result->reserve = PeakReserve::kKept;
    return result;
  }
  return at_rates;
}

int JointPartition::HeldFloor(const ModelDemand& model, double rate) {
  const int held = std::min(model.held_cpus, kMaxCpus);
  if (held < model.min_threads || rate <= 0) return model.min_threads;
  ModelDemand at = model;
  at.rate = rate;
  const auto envelope = Envelope(at, held);
  if (!envelope.ok()) return held;
  for (int c = model.min_threads; c <= held; ++c) {
    if ((*envelope)[static_cast<size_t>(c)]) return c;
  }
  return held;
}

int JointPartition::RateFloor(const ModelDemand& model) { return HeldFloor(model, model.rate); }

int JointPartition::PeakFloor(const ModelDemand& model) {
  return model.peak > model.rate ? HeldFloor(model, model.peak) : RateFloor(model);
}

StatusOr<PartitionResult> JointPartition::Solve(const std::vector<ModelDemand>& models,
                                                int total_cpus) {
  RETURN_IF_ERROR(CheckCpus(total_cpus, "total_cpus"));
  for (const ModelDemand& m : models) RETURN_IF_ERROR(CheckDemand(m));
  ASSIGN_OR_RETURN(const int64_t floors, SumFloors(models, total_cpus));

  PartitionResult result;
  result.models.resize(models.size());
  std::vector<std::vector<Option>> options(models.size());
  // Per model with traffic: its envelope's plan per c (Found points into Plans, which outlive
  // the call); whether no CPU count it may get sustains it; the most CPUs it may get (T less
  // the others' floors).
  std::vector<std::vector<std::optional<Pass::Found>>> envelopes(models.size());
  std::vector<bool> overloaded(models.size(), false);
  std::vector<int> most(models.size());
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelDemand& m = models[i];
    ModelShare& share = result.models[i];
    Pass pass(m, PlansFor(*m.optimizer), policy_simulator_, estimate_simulator_, &result.stats);
    most[i] = total_cpus - static_cast<int>(floors) + m.min_threads;
    if (m.rate <= 0) {
      StatusOr<Plan> plan = m.optimizer->Solve(m.min_threads, 1);
      share.p99_ms = plan.ok() ? pass.eval.PredictedLatencyMs(*plan) : kInf;
      if (plan.ok()) share.plan = *std::move(plan);
      share.reference_ms = m.p99_target_ms.value_or(share.p99_ms);
      options[i].push_back(Option{m.min_threads, share.p99_ms, 0});
      continue;
    }
    // Without a target the reference is the best with all T CPUs, so scan to T.
    envelopes[i] = pass.Scan(m.p99_target_ms ? most[i] : total_cpus);
    const auto p99_at = [&envelope = envelopes[i]](int c) {
      const auto& e = envelope[static_cast<size_t>(c)];
      return e ? e->p99_ms : kInf;
    };
    share.reference_ms = m.p99_target_ms ? *m.p99_target_ms : p99_at(total_cpus);
    overloaded[i] = true;
    for (int c = m.min_threads; c <= most[i]; ++c) {
      overloaded[i] = overloaded[i] && !std::isfinite(p99_at(c));
      if (c > m.min_threads && !(p99_at(c) < p99_at(c - 1))) continue;
      const double p99 = p99_at(c);
      const double ratio = std::isinf(p99) || std::isinf(share.reference_ms)
                               ? kInf
                               : m.weight * p99 / share.reference_ms;
      options[i].push_back(Option{c, p99, ratio});
    }
    if (overloaded[i]) options[i] = OverloadedOptions(m, pass.eval, most[i]);
  }
  KeepWithinTargets(models, total_cpus, &options);                                 // 1
  const std::optional<std::vector<int>> picked = LeastWorst(options, total_cpus);  // 2-5
  if (!picked) return Internal("no allocation within the node's CPUs");
  std::vector<Option> chosen;
  for (size_t i = 0; i < models.size(); ++i) {
    chosen.push_back(options[i][static_cast<size_t>((*picked)[i])]);
  }
  const std::vector<int> extra = SpareToOverloaded(chosen, overloaded, most, total_cpus);  // 6

  for (size_t i = 0; i < models.size(); ++i) {
    const ModelDemand& m = models[i];
    ModelShare& share = result.models[i];
    const Option& o = chosen[i];
    share.cpus = o.cpus + extra[i];
    // An overloaded model's plan is the optimizer's for max_batch, the most rows per second.
    if (extra[i] > 0 || (o.ratio >= kOverloaded && std::isfinite(o.ratio))) {
      if (StatusOr<Plan> plan = m.optimizer->Solve(share.cpus, static_cast<int>(m.max_batch));
          plan.ok()) {
        share.plan = *std::move(plan);
      }
    }
    if (m.rate > 0) {
      const std::optional<Pass::Found>& found = envelopes[i][static_cast<size_t>(o.cpus)];
      if (found) share.plan = found->entry->plan;
      share.p99_ms = o.p99_ms;
      share.ratio = o.ratio >= kOverloaded ? kInf : o.ratio;
      share.sustained = found.has_value();
      share.met = !m.p99_target_ms || o.p99_ms <= *m.p99_target_ms;
    }
  }
  Summarize(total_cpus, &result);
  return result;
}

}  // namespace packrat
