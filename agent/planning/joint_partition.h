// JointPartition: shares one node's CPUs among the models it serves (issue 37), as a pure unit:
// no threads, no clock, no I/O. A node controller describes each model's demand (its profile,
// the rate of single-row requests arriving, its p99 target and weight) and gets back how many
// CPUs each model should have and the plan it would serve on them.
//
// What a model serves on c CPUs: what its own autoscaling policy would plan on a budget of c
// threads at the rate, the keep-up rule: BatchForRate's B from nothing — the smallest B (1, 2,
// 4, ... and max_batch itself) whose optimizer plan for ⟨c,B⟩ keeps the batch-latency limit and
// runs the rate at most max_utilization busy — and that plan: the B the overload path moves to,
// on the optimizer's plans at full batches. One plan per c, so one simulation per distinct plan.
// The batch-latency limit is judged on the policy's own simulator (BatchingSimulator's default
// arrivals), so the plan is the one the policy would pick; the p99 estimates use
// JointPartitionOptions::simulated_requests. The utilisation
// bar means a chosen plan never runs a queue that grows; where no plan passes, the model
// cannot sustain its rate on c CPUs: p99 and ratio are infinite.
//
// Envelope. A model given c CPUs may use fewer, so its p99 on c CPUs is the best over c' ≤ c
// (c' ≥ min_threads) of the rule's p99 on c': non-increasing in c, though the rule's own p99
// is not (a larger budget can move B to a plan that is faster at full batches and slower at
// the rate). A model is only ever given a CPU count at which its envelope drops (a
// breakpoint), where the envelope's plan is the rule's own plan for that count: the node
// controller can hand the model `cpus` as its thread budget and its policy serves that plan.
//
// Objective, lexicographic, over allocations with Σ cpus ≤ T and cpus ≥ min_threads:
//   1. every model with a target (and traffic) within it — p99 ≤ p99_target_ms — if some
//      allocation achieves that for all of them together (all_met); else no target is imposed
//      (no attempt to meet as many as possible: the ratios below already pull towards them);
//   2. the fewest models that cannot sustain their rate (infinite ratio);
//   3. the least worst weighted ratio weight · p99 / reference, over models with traffic and a
//      finite ratio; the reference is the target, or without one the model's best p99 at its
//      rate with all T CPUs to itself (its envelope at T), so an untargeted ratio is ≥ weight;
//   4. the least sum of those ratios (the CPUs left after 3 go where they gain most in total);
//   5. the fewest CPUs assigned. CPUs that lower no model's ratio stay unassigned (spare_cpus):
//      handing a model more than its breakpoint would let its policy pick a plan for the
//      larger budget that the envelope says is worse. The caller may give them out as headroom.
//   6. A model that no CPU count sustains (an overload, or measured slowdowns beyond its
//      profile) is ranked in 3 by 10⁶ + rate / capacity(c) (capacity: rows/s of the
//      optimizer's plan for max_batch on c CPUs): it is the worst of any allocation and gains
//      with every CPU, so the others get what sustains them at the least worst ratio below it
//      and it gets the rest; CPUs still spare go to it too. Its ratio in the result stays ∞.
//      Without this rule it would sit at its floor (2 cannot be improved for it, 5 takes the
//      fewest CPUs) while an idle model took CPUs for a smaller one-row latency.
// A model without traffic (rate 0) has ratio 0 and keeps min_threads CPUs; its plan is the
// optimizer's for B = 1 on them (its first request), its p99 that plan's one-row latency.
//
// Algorithm. (a) Per model, its envelope for c = min_threads..T (targeted: up to T less the
// others' floors), scanning c upwards and asking the rule at c only whether it beats the
// envelope so far: each candidate plan is simulated only if its lower bound on p99 (its
// fastest slice: one instance's least profiled latency for up to its b rows, at its slowdown)
// is below the bar, and each distinct plan at most once per call. The rule's answer below the
// bar is exact (see the .cc), so the envelope is exact. (b) A multiple-choice knapsack over the
// models' breakpoints: a DP over (models, CPUs used) minimising the additive key
// (unsustained models, Σ ratios, Σ CPUs) among breakpoints whose ratio is ≤ θ; the least θ
// that keeps the unsustained count at its minimum is found by bisection over the distinct
// breakpoint ratios, and the DP at that θ gives the allocation (objectives 2-5 exactly;
// a plain min-max DP with a lexicographic tie-break state would not be exact for 3 then 4,
// since the best (max, sum) of a prefix need not extend to the best of the whole). Objective 1
// restricts each targeted model to its breakpoints within target when the least CPUs that
// meet every target fit in T.
//
// Cost. With M models, T CPUs, P batch sizes (≤ 11 up to 1024) and K ≤ T breakpoints per
// model: the scan asks the rule about O(M · T) ⟨model, c⟩ pairs, each O(P) cached plan
// look-ups, and simulates the distinct plans whose bound is below
// the envelope (O(requests × instances) each: 0.5-20 ms on 5000 arrivals); the DP is O(log(M·K) · M
// · T · K). Plans depend only on the profile and ⟨c,B⟩, not on the rate, and are cached per profile
// across calls: the first call for a profile runs the optimizer for every ⟨c,B⟩ it scans;
// later calls at new rates only simulate. Measured in docs/benchmarks.md, "Joint partition solve
// time".
//
// Thread-safety: none; one owner (the node controller's thread), which also calls each
// demand's slowdown function. Results are deterministic: a function of the options, the
// demands and T alone, whatever the caches hold.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/planning/batching_simulator.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/plan_evaluator.h"
#include "common/status.h"

namespace packrat {

// One model's share of the demand on the node.
struct ModelDemand {
  std::string name;  // for messages
  // The model's profile and plan cache. Not owned; must outlive the Solve() call. A
  // JointPartition caches plans per Optimizer address and checks the profile on each use.
  const Optimizer* optimizer = nullptr;
  double rate = 0;  // single-row requests/s arriving, ≥ 0; 0 = no traffic
  // Rows/s of its recent peak (ControllerSnapshot::recent_peak); SolveWithReserve keeps a
  // reserve for it where above `rate`. Solve ignores it.
  double peak = 0;
  // CPUs the model holds now (its share; 0: none). SolveWithReserve lets it keep as many of
  // them as its rate needs (RateFloor), and where the node has room, as its recent peak needs
  // (PeakFloor). Solve ignores it.
  int held_cpus = 0;
  std::optional<double> p99_target_ms;  // batching.p99_target_ms (> 0); nullopt = none
  double weight = 1;                    // > 0: scales the model's ratio
  int min_threads = 1;                  // ≥ 1: the fewest CPUs the model keeps
  int64_t max_batch = 1;                // batching.max_batch (≥ 1): the largest B planned
  PlanEvaluatorOptions evaluation;      // max_delay, inflight batches, batch-latency limit
  double max_utilization = 0.8;         // (0, 1]: reconfiguration.max_utilization
  SlowdownFn slowdown;                  // measured (empty: 1 for every thread count)
};

// A model's rule's plan for a CPU budget, simulated at the model's rate (on the estimates'
// simulator, JointPartitionOptions::simulated_requests).
struct RatePlan {
  int cpus = 0;  // the budget it was planned for (≥ plan.ThreadsUsed())
  Plan plan;
  BatchingSimulator::Result simulated;
};

// A model's part of a PartitionResult.
struct ModelShare {
  int cpus = 0;  // CPUs assigned, ≥ min_threads; the plan uses ≤ cpus threads
  // The plan to serve; nullopt where none sustains the rate on `cpus` (or, without traffic,
  // where the profile has no plan for B = 1).
  std::optional<Plan> plan;
  double p99_ms = 0;  // simulated at the rate (no traffic: the plan's one-row latency); may be ∞
  double reference_ms = 0;  // the target, or the best p99 with all T CPUs; ∞ if none sustains
  double ratio = 0;         // weight · p99 / reference; 0 without traffic; may be ∞
  bool met = true;          // p99 ≤ target; true without a target or traffic
  bool sustained = true;    // a plan on `cpus` serves the rate (always, without traffic)
};

// What SolveWithReserve kept in reserve for the models' recent peaks.
enum class PeakReserve {
  kNone,     // the rates now
  kPlanned,  // each model's recent peak, planned for
  kKept,     // of the CPUs each model holds, as many as its recent peak needs (PeakFloor)
  // Keep kKept last, or change PeakReserveName's table, which counts to it.
};
// "none", "planned", "kept".
std::string_view PeakReserveName(PeakReserve reserve);

struct PartitionResult {
  std::vector<ModelShare> models;  // in the order of the demands
  double worst_ratio = 0;          // the largest ratio (∞ if a model is not sustained)
  double ratio_sum = 0;            // Σ of the finite ratios
  int unsustained = 0;             // models with traffic that no plan on their CPUs serves
  bool all_met = true;             // every targeted model with traffic within its target
  int cpus_assigned = 0;           // Σ cpus
  int spare_cpus = 0;              // T − cpus_assigned: CPUs that lower no model's ratio
  PeakReserve reserve = PeakReserve::kNone;  // SolveWithReserve's: which it solved for
  // What the call cost (for benchmarks and logs).
  struct Stats {
    int64_t rule_evaluations = 0;  // ⟨model, c⟩ pairs the rule was asked about
    int64_t plans_bounded = 0;     // candidate plans looked at
    int64_t simulations = 0;       // BatchingSimulator runs
  } stats;
};

struct JointPartitionOptions {
  // Arrivals per simulation of the keep-up rule's p99 estimates (≥ 100). Its plans do not depend
  // on them; the one choice it makes by simulation (the batch-latency limit)
  // runs on the policy's own simulator (BatchingSimulator's defaults, 5000 arrivals), so it
  // agrees with the policy. 1000 draws make a simulation about five times cheaper than the
  // policy's 5000 and the p99 the 10th-largest of 1000 latencies instead of the 50th of 5000:
  // on the published profiles (T = 32-128, 2-16 models) the allocation it picks has a worst
  // ratio, judged on 5000 draws, at most 6% above the best (docs/benchmarks.md). 5000 gives
  // the policy's own numbers at five times the cost.
  int simulated_requests = 1000;
};

class JointPartition {
 public:
  // The largest node: a thread count the agent accepts in a plan.
  static constexpr int kMaxCpus = 4096;

  // Draws the simulators' arrivals (the policy's seed).
  explicit JointPartition(JointPartitionOptions options = {});
  ~JointPartition();
  JointPartition(const JointPartition&) = delete;
  JointPartition& operator=(const JointPartition&) = delete;

  // The allocation of `total_cpus` (T) CPUs among `models` by the objective above. Errors:
  // kInvalidArgument for T outside 1..kMaxCpus or a demand that breaks its field contracts
  // (the message names the model); kResourceExhausted if the models' min_threads add up to
  // more than T. Cost: see the file comment; blocks for the simulations, so callers on an I/O
  // thread hand it off.
  StatusOr<PartitionResult> Solve(const std::vector<ModelDemand>& models, int total_cpus);

  // Solve for the rates now, where every model keeps as many of the CPUs it holds as its rate
  // needs (RateFloor): a move for one model never costs another the CPUs its rate needs.
  // (Where those floors do not fit the node, a plain Solve.) Then the first of two reserves
  // for the models' recent peaks that the node has room for — no more models unsustained than
  // at the rates, and each model that the rates sustain still sustained at its rate now on its
  // share — else the rates (PartitionResult::reserve says which):
  //   1. each model's recent peak where above its rate, planned for (kPlanned);
  //   2. each model keeps as many of the CPUs it holds as its recent peak needs (PeakFloor),
  //      and the rest goes where the rates need it (kKept).
  // Between its bursts an on-off model keeps the CPUs its next burst needs, as a static split
  // keeps them, where the node has room; without a reserve each burst finds them given away
  // and waits out a move to get them back (seconds of queue). A reserve never costs a model
  // its rate. Up to four Solve()s, and up to two Envelope()s a model for its floors. The shares
  // and plans are for the peaks or floors; what a share does for a model now is its Envelope
  // at its rate.
  StatusOr<PartitionResult> SolveWithReserve(const std::vector<ModelDemand>& models,
                                             int total_cpus);

  // The floors SolveWithReserve gives `model`, of the CPUs it holds (held_cpus), never below
  // min_threads. RateFloor: the fewest on which its keep-up rule sustains its rate now
  // (min_threads without traffic), and all it holds where none of them does: a model that
  // lacks CPUs gains capacity with each. PeakFloor: likewise for its recent peak, where above
  // its rate (else its RateFloor).
  int RateFloor(const ModelDemand& model);
  int PeakFloor(const ModelDemand& model);

  // The model's keep-up plan on exactly `cpus` CPUs (no envelope),
  // or nullopt where none sustains the rate. For tests and diagnostics. kInvalidArgument for a bad
  // demand, a rate of 0 or cpus outside 1..kMaxCpus.
  StatusOr<std::optional<RatePlan>> PolicyAt(const ModelDemand& model, int cpus);

  // The envelope for c = 0..max_cpus: entry c is the best RatePlan over min_threads ≤ c' ≤ c
  // (lowest p99, then fewest CPUs), nullopt below min_threads and where none sustains the
  // rate. Errors as PolicyAt, and for max_cpus < min_threads.
  StatusOr<std::vector<std::optional<RatePlan>>> Envelope(const ModelDemand& model, int max_cpus);

  // Drops the plans cached for `optimizer` (which may be destroyed already): for a model
  // unloaded or re-profiled. Without it the cache keeps one entry per Optimizer address ever
  // passed in (a different profile at a reused address is detected and replaced).
  void Forget(const Optimizer* optimizer);

  // Distinct plans cached across calls, over all profiles.
  size_t CachedPlanCount() const;

 private:
  struct Plans;  // rate-independent candidate plans of one profile
  struct Pass;   // one model at one rate, within one call

  Plans& PlansFor(const Optimizer& optimizer);
  // The fewest of the CPUs `model` holds on which its keep-up rule sustains `rate`, all it
  // holds where none does; min_threads at no rate or where it holds fewer.
  int HeldFloor(const ModelDemand& model, double rate);

  const BatchingSimulator policy_simulator_;    // the autoscaler's: 5000 arrivals, seed 1
  const BatchingSimulator estimate_simulator_;  // simulated_requests arrivals, seed 1
  std::map<const Optimizer*, std::unique_ptr<Plans>> plans_;
};

}  // namespace packrat
