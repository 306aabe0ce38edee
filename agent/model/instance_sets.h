// InstanceSets: the runtimes a model serves with, and the mechanics of changing them without
// downtime (packrat-paper §3.7) — apart from the policy that decides when (autoscaler.h).
//
// Three kinds of runtime, owned here:
//   - the active set: the plan being served; the scheduler cuts batches for its dispatcher;
//   - draining sets: earlier plans finishing the batches they run;
//   - parked runtimes (reconfiguration.parked_runtimes): started and warm but idle, off every
//     dispatcher, holding no CPU lease, oldest first; a later plan takes them back.
//
// Switch(groups) serves a new plan as the next generation: SetDiff says which live runtimes
// are kept (their shape, or — resizable runtimes — their thread count at another b), which
// parked ones are taken back and which start (beside the serving set, on its own CPUs where free
// ones exist; WorkerStarter). Only when every new runtime has warmed up does the scheduler switch
// to the new set (SetHooks::switched), and Switch returns. The old set is retired on this
// object's own thread, in the order the switches happened: it finishes its running batches, and
// its runtimes that were not kept are parked (live ones, once the set is idle, up to the limit:
// the oldest are evicted) or stop. So the control thread decides again while an old set drains
// (its slices may take tens of seconds behind a backlog); WaitRetired waits for the retires where
// the caller needs their CPUs. A failed start leaves the old set serving and the parked ones
// parked. No request fails or is answered twice because of a switch.
//
// Thread-safety: Switch, StartFirst and Install run on one thread at a time (the model's
// control thread, and Load before it starts); everything else may be called from any thread.
// The retiring thread changes parked_ only while no Switch runs (switch_mu_).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/metrics/agent_metrics.h"
#include "agent/model/instance_set.h"
#include "agent/model/serving_snapshot.h"
#include "agent/model/set_diff.h"
#include "agent/model/set_switcher.h"
#include "agent/model/worker_starter.h"
#include "agent/planning/slowdown_tracker.h"
#include "common/mutex.h"
#include "common/revision.h"

namespace packrat {

struct InstanceSetsOptions {
  std::string model_name;
  // The runtimes run any b up to their capacity (ServedModel::ResizableRuntimes).
  bool resizable = false;
  size_t park_limit = 0;  // reconfiguration.parked_runtimes, resolved
  std::chrono::seconds drain_timeout{60};
  ResourceAllocator* allocator = nullptr;    // not owned; null: no CPU leases
  metrics::ModelMetrics* metrics = nullptr;  // not owned; null: no metrics
  SlowdownTracker* slowdowns = nullptr;      // not owned; switches are bracketed in it
  Revision* revision = nullptr;              // not owned; bumped by every visible change
};

// What the served model does for a set (it owns the scheduler and the batching modes).
struct SetHooks {
  // Builds set `generation` of `workers`, each serving b = batches[i] in it (the dispatcher,
  // B and the backlog batch).
  std::function<std::shared_ptr<InstanceSet>(
      uint64_t generation, std::vector<InstanceGroup> groups, std::optional<Plan> plan,
      std::vector<std::shared_ptr<Worker>> workers, std::vector<int64_t> batches)>
      make_set;
  // `next` serves from now on: batches cut from now go to it. On return no batch is still
  // being handed to the previous set (its dispatcher then only finishes what it has).
  std::function<void(const InstanceSet& next)> switched;
  // Before a plan's runtimes start (layered batching: its stage profiles). Blocking; an error
  // cancels the switch.
  std::function<Status(const std::vector<InstanceGroup>& groups)> prepare;
};

class InstanceSets final : public SetSwitcher {
 public:
  // `starter` is not owned and outlives this.
  InstanceSets(InstanceSetsOptions options, const WorkerStarter* starter, SetHooks hooks);
  ~InstanceSets() override;  // finishes the retires begun (WaitRetired), then ends their thread

  // The first set: prepares and starts `groups` and builds the set, without serving it
  // (Install does). Blocking.
  StatusOr<std::shared_ptr<InstanceSet>> StartFirst(const std::vector<InstanceGroup>& groups,
                                                    const std::optional<Plan>& plan);
  void Install(std::shared_ptr<InstanceSet> set);

  // Serves `groups` as the next generation (class comment). `restart`: replacing dead runtimes,
  // counted as restarts, not as a reconfiguration. `reason` is for the log. Blocks for the
  // starts; returns once the new set serves, and the old one is retired on the retiring thread.
  // FailedPrecondition before Install.
  Status Switch(const std::vector<InstanceGroup>& groups, const std::optional<Plan>& plan,
                const std::string& reason, bool restart) override;
  // Blocks until every set replaced so far has drained (up to drain_timeout each) and its
  // runtimes are parked or stopped.
  void WaitRetired() const override EXCLUDES(mu_);

  // A batch runtime died: each of its slices not retried before goes once to the live instance
  // of the active set with the least load that can take it; the rest fail with kUnavailable.
  void RetryOrphans(std::vector<WorkSlice> orphans, const std::string& why) const;

  // Finishes the retires begun (their sets drain as they would have), then stops every
  // runtime: parked ones at once, then the others, each with the time left until `deadline` to
  // finish its work. Afterwards there is no active set, and nothing is retired any more.
  void StopAll(std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<InstanceSet> active() const override;
  bool ActiveHasDeadRuntime() const override;
  std::vector<int> LiveParkedThreads() const override;
  std::vector<int> KeepableThreads() const override;
  // Thread counts of the live serving runtimes whose CPUs all lie in `cpus` (sorted; nullopt:
  // all of them), in serving order: KeepableThreads for a share not given yet. Any thread.
  std::vector<int> ThreadsInside(const std::optional<std::vector<int>>& cpus) const;
  int FreeCpus() const override;
  StartTimes start_times() const override;
  // The instance-set part of a snapshot: generation, B, groups, plan, workers and parked.
  void Fill(ServingSnapshot* snapshot) const;

 private:
  // Switch's parts. The diff from `old` to `groups` (DiffSets) over the serving and parked
  // runtimes usable inside the model's share (those outside are evicted first); the parked
  // ones it was made on, oldest first, in *parked_before. The switching thread only.
  SetDiff DiffFor(const InstanceSet& old, const std::vector<InstanceGroup>& groups,
                  std::vector<std::shared_ptr<Worker>>* parked_before) EXCLUDES(mu_);
  // Records a switch to `next` begun at `began` that started `started` runtimes and unparked
  // `unparked`: the start time, the metrics (a restart's or a reconfiguration's) and the log.
  void NoteSwitched(const InstanceSet& next, std::chrono::steady_clock::time_point began,
                    size_t started, size_t unparked, bool restart) EXCLUDES(mu_);
  // Takes the parked runtimes `diff` unparks (indices into `parked_before`, the parked ones
  // when it was made) out of parked_ and gives them back their CPU leases; Repark undoes it
  // after a failed start. The switching thread only.
  std::vector<std::shared_ptr<Worker>> Unpark(
      const SetDiff& diff, const std::vector<std::shared_ptr<Worker>>& parked_before);
  void Repark(const std::vector<std::shared_ptr<Worker>>& unparked,
              const std::vector<std::shared_ptr<Worker>>& parked_before);
  // A set replaced by a switch, and the runtimes the next set kept of it.
  struct Replaced {
    std::shared_ptr<InstanceSet> old;
    std::vector<std::shared_ptr<Worker>> kept;
  };
  // The retiring thread: Retire()s each replaced set in the order queued, then ends the switch's
  // bracket in the slowdown tracker (its slices ran beside the draining runtimes).
  void RetireLoop() EXCLUDES(mu_);
  // Moves `r.old`'s runtimes that the next set did not keep to parked or stopped (class
  // comment), once its batches finished (up to drain_timeout). The retiring thread only.
  void Retire(const Replaced& r) EXCLUDES(mu_, switch_mu_);
  // Stops the parked runtimes outside `share` (the node partition gave their CPUs to another
  // model), before a switch decides anything: even a switch that changes nothing then leaves
  // no runtime of this model on those CPUs. The switching thread only.
  void EvictOutside(const std::optional<std::vector<int>>& share) EXCLUDES(mu_);
  void PublishInstancesLocked() REQUIRES(mu_);
  void Changed() const {
    if (options_.revision) options_.revision->Bump();
  }

  const InstanceSetsOptions options_;
  const WorkerStarter* const starter_;
  const SetHooks hooks_;
  uint64_t next_generation_ = 1;  // the switching thread only

  // Held by Switch throughout and by Retire while it parks and stops runtimes: a switch's diff
  // is made on the parked runtimes it then takes back.
  Mutex switch_mu_;
  mutable Mutex mu_;
  mutable CondVar retired_cv_;  // a retire finished, or one was queued, or stopping
  std::deque<Replaced> to_retire_ GUARDED_BY(mu_);
  bool retiring_ GUARDED_BY(mu_) = false;  // the retiring thread runs one
  bool stop_retiring_ GUARDED_BY(mu_) = false;
  std::thread retirer_;
  std::shared_ptr<InstanceSet> active_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<InstanceSet>> draining_ GUARDED_BY(mu_);
  // Parked runtimes, oldest first; changed by the switching thread, the retiring thread (under
  // switch_mu_) and StopAll only.
  std::vector<std::shared_ptr<Worker>> parked_ GUARDED_BY(mu_);
  StartTimes start_times_ GUARDED_BY(mu_);
};

// For logs: "2×⟨t=1,b=4⟩ + 1×⟨t=2,b=8⟩".
std::string GroupsString(const std::vector<InstanceGroup>& groups);

}  // namespace packrat
