// PartitionPolicy: when the node controller moves CPUs between models (issue 37), as a pure
// unit: no threads, no clock of its own, no I/O. JointPartition says what the best partition
// is at the rates measured now; this decides whether moving to it is worth a switch.
//
// A move switches the instance sets of every model whose CPU count changes, and a switch costs:
// the shrinking model's new set warms up beside its old one, the growing model's too, and
// requests arriving meanwhile wait longer. So the rule, evaluated at each decision:
//
//   1. Always move where the target leaves fewer models lacking CPUs than now, or where a model
//      holds fewer CPUs than its floor or is new (no current CPUs): correctness first. A model
//      lacks CPUs now where it is behind, observed: its oldest queued row has waited too long
//      for a whole window, on the plan of most capacity its share allows
//      (ControllerSnapshot::behind). Not where only the planner says that its rate exceeds
//      max_utilization of its share: a share that queues through a burst lacks nothing, and a
//      move for each burst costs a switch that outlasts it. At the target a model lacks CPUs
//      where it is behind now and gets no more, or where the planner says it cannot sustain
//      its rate on the target's CPUs and the target shrinks it or it is behind now. (The node
//      controller's target, JointPartition::SolveWithReserve, never takes from a model that
//      keeps up what its rate needs of the CPUs it holds.) Likewise where a model
//      behind now lacks CPUs at the target too and the target gives it more (an overload:
//      JointPartition hands such a model the CPUs no one else needs, and each adds capacity),
//      unless that leaves more models lacking CPUs.
//   2. Otherwise move only if no model it shrinks would then fall behind (sustain its rate
//      on the target CPUs: a move for gain never costs another model its rate), nor where
//      every model with traffic has a p99 target (batching.p99_target_ms) and meets it now and
//      the move shrinks one of them (a lower p99 than the targets ask for does not pay for the
//      capacity a shrunk model gives up: its next burst finds it gone; the autoscaler's step
//      down holds so too), and all of:
//      a. the target's worst ratio is at most (1 − min_gain) × the current one's (noise in the
//         measured rates moves a ratio by a few percent; min_gain = 10% keeps that still);
//      b. the gain over the time the rates are expected to hold exceeds the switch's cost, in
//         request-milliseconds:
//           gain = Σ_m min(horizon_s, age_m) × rate_m × max(0, p99_now_m − p99_target_m)
//           cost = switch_s × Σ_{m whose CPUs change} rate_m × p99_now_m
//         (a rate is expected to hold about as long again as it has held since the model's
//         arrivals last stepped beyond noise, age_m, and at most the horizon: a burst a few
//         seconds old does not repay a switch of seconds, a phase that has held for a minute
//         may; every request arriving during a switch is assumed to wait one more p99 of the
//         current plan: the shadow set competes for the cores; switch_s is how long the last
//         move took, or the default before one). A p99 now that is infinite (the rate beyond
//         what the share serves at all; the node controller judges the share now fully busy)
//         counts neither gain nor cost: such a model is behind soon, and rule 1's;
//      c. the same target (CPU counts) has come out of `confirmations` consecutive decisions
//         (a rate spike of one decision does not move cores);
//      d. at least `cooldown` has passed since the last move ended.
// A decision says which rule moved or which condition held it (PartitionReason, for
// GET /v2/node/partition, the log and packrat_partition_moves_total{reason}).
//
// Thread-safety: none; the node controller's thread owns it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/planning/joint_partition.h"

namespace packrat {

struct PartitionPolicyOptions {
  double min_gain = 0.10;                          // 2a
  std::chrono::seconds horizon{60};                // 2b, the longest a rate is expected to hold
  std::chrono::milliseconds default_switch{5000};  // 2b, until a switch was measured
  int confirmations = 2;                           // 2c
  std::chrono::milliseconds cooldown{10000};       // 2d
};

// One model as the policy sees it: its CPUs now and in the target, and how it fares on each.
struct PartitionModel {
  std::string name;
  int current_cpus = 0;  // 0: new, or without a share yet
  int target_cpus = 0;
  double rate = 0;           // rows/s
  double p99_now_ms = 0;     // on current_cpus (∞ if it cannot sustain the rate there)
  double p99_target_ms = 0;  // on target_cpus
  double ratio_now = 0;      // weighted ratio on current_cpus, as JointPartition defines it
  double ratio_target = 0;
  int min_threads = 1;
  std::optional<double> slo_ms;  // batching.p99_target_ms, where set
  bool behind = false;           // observed on current_cpus (ControllerSnapshot::behind)
  // How long its rate has held (since its arrivals last stepped beyond Poisson noise); nullopt:
  // not known (the horizon counts).
  std::optional<std::chrono::milliseconds> rate_age;
};

enum class PartitionReason {
  // Moves, by the rule that takes them.
  kFloor,        // 1: a model below its floor, or new
  kUnsustained,  // 1: the target leaves fewer models lacking CPUs
  kOverloaded,   // 1: a model behind now and not sustained at the target gets more CPUs
  kGain,         // 2: the target is better by min_gain, repays its switch, confirmed
  // Holds, by the condition that held the move.
  kNoChange,         // the target is the current partition
  kStarves,          // 2: a shrunk model would not sustain its rate (`model`)
  kWithinTargets,    // 2: every model meets its p99 target now, and the move shrinks one
  kBelowMinGain,     // 2a
  kCostExceedsGain,  // 2b
  kUnconfirmed,      // 2c
  kCooldown,         // 2d
  kShrinkRestarts,   // the node controller's veto: a shrink of `model` would start runtimes
  // Keep kShrinkRestarts last, or change PartitionReasonName's table, which counts to it.
};
// "floor", "unsustained", ..., "shrink restarts": the reason in words.
std::string_view PartitionReasonName(PartitionReason reason);

struct PartitionDecision {
  bool move = false;
  PartitionReason reason = PartitionReason::kNoChange;
  std::string model;  // the model a kStarves or kShrinkRestarts hold names
  // The reason in words, with its model where it names one ("starves 'b'").
  std::string Why() const;
  double worst_now = 0;
  double worst_target = 0;
  double gain_ms = 0;  // request-milliseconds over the horizon (2b)
  double cost_ms = 0;
};

class PartitionPolicy {
 public:
  explicit PartitionPolicy(PartitionPolicyOptions options = {}) : options_(options) {}

  // Decides on `models` at `now`. Records the target for the confirmation count.
  PartitionDecision Decide(const std::vector<PartitionModel>& models,
                           std::chrono::steady_clock::time_point now);
  // A move ended at `now` after taking `took` (its slowest switch): starts the cooldown and
  // updates the switch time the cost uses.
  void MoveDone(std::chrono::steady_clock::time_point now, std::chrono::milliseconds took);

  const PartitionPolicyOptions& options() const { return options_; }

 private:
  // Records the target for rule 2c; whether it changes any model's CPUs.
  bool Confirm(const std::vector<PartitionModel>& models);
  // Rule 1: the move correctness needs, or nullopt.
  static std::optional<PartitionReason> Needed(const std::vector<PartitionModel>& models);
  // Rule 2b: d's gain and cost.
  void Weigh(const std::vector<PartitionModel>& models, PartitionDecision* d) const;

  const PartitionPolicyOptions options_;
  std::map<std::string, int> last_target_;  // the previous decision's target counts
  int seen_ = 0;                            // consecutive decisions with that target
  std::optional<std::chrono::steady_clock::time_point> last_move_end_;
  std::optional<std::chrono::milliseconds> switch_time_;
};

}  // namespace packrat
