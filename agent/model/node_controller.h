// NodeController: shares the node's CPUs among its models by load (issue 37) and moves them as
// the load moves, without downtime and without two models' runtimes on one CPU.
//
// Who takes part: every ready model that is a PartitionCandidate (`instances: auto` without
// `auto_threads`, batched), once there are at least two of them; a single auto model keeps the
// node to itself as before. The pool is the node's CPUs less the shares of the other models
// (explicit plans loaded from the repository). Models in the main config with explicit plans
// have no share and place anywhere: give them `auto_threads` or a repository folder to keep
// them apart.
//
// Each decision (every `interval`, at once after a model is loaded or unloaded, and at once when
// a model's arrivals step away from what the last decision planned for, or a model falls
// behind: `watch`; none until every model's rate is measured, a second after it is ready): the
// models' demands (profile; rate: arrivals plus backlog, see PlannedRate; p99 target,
// weight, floor) go to JointPartition, the target and the current partition to PartitionPolicy (the
// hysteresis rule: partition_policy.h). A move then runs in two phases:
//   1. shrink: every model losing CPUs gets its smaller share — a subset of its old one, the
//      CPUs of as many of its runtimes as fit (CpusToKeep) — and serves on its runtimes inside
//      it alone where they keep up (ResizeRequest::at_once: a
//      switch that starts nothing), else switches to its plan for it; the old set drains and
//      frees the rest;
//   2. grow: once every shrink has finished (the freed CPUs hold no runtime any more), every
//      model gaining CPUs gets the freed ones added to its share and switches to its plan
//      (ModelController::Resize: keeping its serving runtimes where that costs little, or in
//      stages, so that new runtimes start on free CPUs, beside none that serve); meanwhile each
//      shrunk model switches to its own plan on its own CPUs.
// So a CPU belongs to at most one model's share at any time, and a runtime runs only inside its
// model's share (InstanceSets keeps no runtime outside it), so no CPU ever runs two models'
// runtimes. A shrink that fails leaves that model's share as it was and skips the growth into
// it.
//
// Observable: Json() is GET /v2/node/partition; packrat_model_cpus{model} and
// packrat_partition_moves_total{reason}.
//
// Thread-safety: Start/Stop/Changed/Json from any thread; decisions run on its own thread.
#pragma once

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/metrics/agent_metrics.h"
#include "agent/model/model_controller.h"
#include "agent/model/model_registry.h"
#include "agent/planning/joint_partition.h"
#include "agent/planning/partition_policy.h"
#include "agent/pool/resource_allocator.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace packrat {

struct NodeControllerOptions {
  ModelRegistry* registry = nullptr;         // not owned
  ResourceAllocator* allocator = nullptr;    // not owned
  metrics::AgentMetrics* metrics = nullptr;  // not owned; null: no metrics
  Clock* clock = Clock::Real();              // not owned
  std::chrono::milliseconds interval{1000};
  // How often, between decisions, it looks for a model whose planned rate moved away from the
  // one the last decision planned for it (Stepped); such a step decides one watch period later,
  // not at the next interval.
  std::chrono::milliseconds watch{100};
  PartitionPolicyOptions policy;
};

class NodeController {
 public:
  explicit NodeController(NodeControllerOptions options);
  ~NodeController();  // Stop()s

  void Start();
  // Ends the loop after the decision in progress (a move in progress finishes first).
  void Stop() EXCLUDES(mu_);
  // A model was loaded or unloaded: decide now rather than at the next interval.
  void Changed() EXCLUDES(mu_);

  // One decision at `now`, on the caller's thread (tests; the loop calls it).
  void Decide(SteadyTime now) EXCLUDES(decide_mu_);
  // Before `models` (the main config's, not loaded yet) load: gives those that will take part
  // in the partition (ServedModel::PartitionCandidate), where there are two or more, equal
  // shares of the CPUs free now, so that each plans within its own part of the node instead of
  // all of them on every CPU until the first decision. Load the other models first: their
  // runtimes' CPUs are not free.
  void SplitFreeCpus(const std::vector<std::shared_ptr<ServedModel>>& models) EXCLUDES(decide_mu_);
  // A model is being loaded and needs `cpus` CPUs no share holds: shrinks the partition's models
  // (as a move's first phase) until that many are free. ResourceExhausted if their floors do
  // not leave that many. Blocks while they switch.
  Status MakeRoom(const std::string& model, int cpus) EXCLUDES(decide_mu_);

  // GET /v2/node/partition: {"cpus":T,"active":bool,"objective":{"worst_ratio","ratio_sum",
  // "all_met"},"models":[{"name","cpus","share","target_cpus","plan":[...],"rate",
  // "predicted_p99_ms","current_p99_ms","behind","rate_held_s","target_p99_ms","ratio"}],
  // "decision":{"move","why",...},"last_move":{"at_unix_ms","why","took_ms","from":{m:n},"to":{m:n}}}
  std::string Json() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  // Whether a participant's arrivals stepped (ServedModel::arrival_rate_shift) so that its
  // planned rate moved away from the one the last decision planned for it, up or down, by more
  // than a fraction kWatchRise − 1 of it and than Poisson noise; or, for a model no decision has
  // planned for yet, whether its planned rate is beyond noise; or whether a participant is
  // behind (ControllerSnapshot::behind) that the last decision did not see behind.
  bool Stepped() const EXCLUDES(mu_);
  static constexpr double kWatchRise = 1.2;
  struct Moved {
    std::string model;
    int cpus = 0;
  };
  // One decision's view for PartitionPolicy, and what a move would carry out: per model, its
  // CPUs, plan and planned rate at the target.
  struct Proposal {
    std::vector<PartitionModel> view;
    std::map<std::string, int> target;
    std::map<std::string, std::optional<Plan>> plans;
    std::map<std::string, double> rates;
  };
  // The proposal of `result` (the joint partition of `total` CPUs for `demands`, one per model)
  // against the models' `shares` and controller `snapshots` (whether each is behind, and how
  // long its rate has held) at `now`.
  Proposal Propose(const std::vector<std::shared_ptr<ServedModel>>& models,
                   const std::vector<std::optional<ControllerSnapshot>>& snapshots,
                   const std::vector<ModelDemand>& demands, const PartitionResult& result,
                   const std::map<std::string, std::vector<int>>& shares, int total, SteadyTime now)
      REQUIRES(decide_mu_);
  // GET /v2/node/partition's body for a decision, less its closing brace (and last move).
  static std::string DecisionJson(int total, const std::vector<ModelDemand>& demands,
                                  const PartitionResult& result,
                                  const std::map<std::string, std::vector<int>>& shares,
                                  const Proposal& proposal, const PartitionDecision& decision);
  // " name@rows/s" per model, for the log.
  static std::string RatesText(const Proposal& proposal);
  // Logs a hold where its reason or target changed since the last one logged.
  void NoteHold(const PartitionDecision& decision, const Proposal& proposal) REQUIRES(decide_mu_);
  // Carries out a move: Move, the policy's cooldown, the metric and the last move's record.
  void CarryOut(const std::vector<std::shared_ptr<ServedModel>>& models, const Proposal& proposal,
                const std::vector<int>& pool, const PartitionDecision& decision)
      REQUIRES(decide_mu_) EXCLUDES(mu_);

  // Carries out the move to proposal.target (model -> CPUs), each model switching to its plan
  // at the rate it was planned for; returns how long it took.
  std::chrono::milliseconds Move(const std::vector<std::shared_ptr<ServedModel>>& models,
                                 const Proposal& proposal, const std::vector<int>& pool)
      REQUIRES(decide_mu_);
  // A model's resize in flight (ResizeAsync).
  using Resizing = std::pair<std::shared_ptr<ServedModel>, std::future<Status>>;
  // Move's step 2: models below their target take CPUs of `pool` no share holds, and start
  // switching (*growing).
  void Grow(const std::vector<std::shared_ptr<ServedModel>>& models, const Proposal& proposal,
            const std::vector<int>& pool, std::vector<Resizing>* growing) REQUIRES(decide_mu_);
  static ResizeRequest RequestFor(const Proposal& proposal, const std::string& name, bool at_once);

  // A move for gain alone (PartitionPolicy's rule 2) waits while a model it shrinks would not
  // keep serving on its runtimes inside the smaller share (ServedModel::ShrinkKeeps): that
  // shrink would start a new set beside its busy runtimes, a cost the policy's switch time
  // does not bound, and its own autoscaler would soon move again. Sets `decision` to a hold
  // (PartitionReason::kShrinkRestarts) then. Correctness moves (rule 1) go ahead regardless.
  void HoldRestartingShrink(const std::vector<std::shared_ptr<ServedModel>>& models,
                            const Proposal& proposal, PartitionDecision* decision) const;

  // The models that take part now, and the pool of CPUs they share.
  std::vector<std::shared_ptr<ServedModel>> Participants() const;
  std::vector<int> Pool(const std::vector<std::shared_ptr<ServedModel>>& models) const;

  const NodeControllerOptions options_;
  // Decisions and MakeRoom, one at a time (the loop's and a repository load's).
  Mutex decide_mu_ ACQUIRED_BEFORE(mu_);
  JointPartition partition_ GUARDED_BY(decide_mu_);
  PartitionPolicy policy_ GUARDED_BY(decide_mu_);
  std::string last_hold_ GUARDED_BY(decide_mu_);  // the last hold logged: why and target

  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool changed_ GUARDED_BY(mu_) = false;
  std::string json_ GUARDED_BY(mu_) = "{\"active\":false}";
  std::string last_move_json_ GUARDED_BY(mu_);
  // What the last decision saw of each model: its planned rate, and whether it was behind.
  struct Planned {
    double rate = 0;
    bool behind = false;
  };
  std::map<std::string, Planned> planned_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace packrat
