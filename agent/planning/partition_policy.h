// PartitionPolicy: when the node controller moves CPUs between models (issue 37), as a pure
// unit: no threads, no clock of its own, no I/O. JointPartition says what the best partition
// is at the rates measured now; this decides whether moving to it is worth a switch.
//
// A move switches the instance sets of every model whose CPU count changes, and a switch costs:
// the shrinking model's new set warms up beside its old one, the growing model's too, and
// requests arriving meanwhile wait longer. So the rule, evaluated at each decision:
//
//   1. Always move where the current partition leaves a model unable to sustain its rate and
//      the target partition does not (fewer unsustained models; the node controller's target,
//      JointPartition::SolveWithReserve, never takes from a model that keeps up what its rate
//      needs of the CPUs it holds), or where a model holds fewer
//      CPUs than its floor or is new (no current CPUs): correctness first. Likewise where a
//      model sustains its rate neither now nor at the target and the target gives it more CPUs
//      (an overload: JointPartition hands such a model the CPUs no one else needs, and each
//      adds capacity), unless that leaves more models unsustained.
//   2. Otherwise move only if no model it shrinks would then fall behind (sustain its rate
//      on the target CPUs: a move for gain never costs another model its rate), nor where
//      every model with traffic has a p99 target (batching.p99_target_ms) and meets it now and
//      the move shrinks one of them (a lower p99 than the targets ask for does not pay for the
//      capacity a shrunk model gives up: its next burst finds it gone; the autoscaler's step
//      down holds so too), and all of:
//      a. the target's worst ratio is at most (1 − min_gain) × the current one's (noise in the
//         measured rates moves a ratio by a few percent; min_gain = 10% keeps that still);
//      b. the gain over the horizon exceeds the switch's cost, in request-milliseconds:
//           gain = horizon_s × Σ_m rate_m × max(0, p99_now_m − p99_target_m)
//           cost = switch_s × Σ_{m whose CPUs change} rate_m × p99_now_m
//         (every request arriving during a switch is assumed to wait one more p99 of the
//         current plan: the shadow set competes for the cores; switch_s is how long the last
//         move took, or the default before one);
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
  std::chrono::seconds horizon{60};                // 2b
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
};

enum class PartitionReason {
  // Moves, by the rule that takes them.
  kFloor,        // 1: a model below its floor, or new
  kUnsustained,  // 1: the target leaves fewer models unable to sustain their rates
  kOverloaded,   // 1: a model sustained neither now nor at the target gets more CPUs
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
