// Migration: how a model's instances move to a new plan on CPUs that serve, without starting
// the new runtimes beside the busy ones (issue "virtual many-core node": hand cores over
// instead). A switch of sets starts every new runtime while the old set still serves; where
// the new runtimes land on the old set's CPUs, both compete for them until the old set drains
// (the switch that took 10.9 s on 16 cores). A migration goes in stages instead, each a switch
// of its own:
//   - keep every serving runtime whose thread count the target has (resizable runtimes serve
//     any b of it);
//   - start target runtimes still missing, largest first, only as many as the free CPUs hold;
//   - drop serving runtimes the target lacks, largest first, while the stage's capacity stays
//     at least min(need, its capacity without drops): a set short of capacity (a growth under
//     load) first grows, and drops only once what it started carries the load. Their CPUs are
//     the next stage's free ones. A stage that can start nothing may still drop;
//   - and while its requests' p99 at the rate stays within a bound set when the migration
//     starts (StageP99BoundMs: kStageP99Slack above the worse of the serving runtimes' and
//     the target's): a stage serves for about a runtime's start, long enough to decide a p99
//     over seconds. A stage that keeps capacity only by cutting batches of many more rows than
//     either end's drops fewer.
//   - A stage that starts nothing is worth its switch only where it frees the CPUs for the
//     smallest missing runtime, which the next stage starts: where the bounded drops free
//     fewer, it drops the fewest more that keep capacity (largest first), beyond the bound;
//     where even that falls short, there is no stage (a plain switch gets there, beside all
//     the serving runtimes rather than fewer). A stage keeps one runtime at least.
// The last stage is the target itself, once everything it starts fits on the free CPUs.
//
// Pure: thread counts in, thread counts out; the model's control thread carries the stages
// out (ModelController::Resize).
#pragma once

#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace packrat {

// What a stage of runtimes (thread counts) serves: the rows/s of its best plan and that plan's
// requests' p99 in ms at the rate (its batch latency where the rate is unknown); capacity 0 and
// an infinite p99 where no plan runs on them. `overloaded`: the rate is at least the capacity,
// so the p99 is only how long the simulation let the queue grow and does not compare.
struct StageEstimate {
  double capacity = 0;
  double p99_ms = 0;
  bool overloaded = false;
};
using StageEstimator = std::function<StageEstimate(const std::vector<int>& instances)>;

// A stage's p99 may exceed the worse of the serving runtimes' (when the migration starts) and
// the target's by this share (StageP99BoundMs).
inline constexpr double kStageP99Slack = 0.25;

struct MigrationStep {
  bool final = false;          // switch to the target: what it starts fits the free CPUs
  std::vector<int> instances;  // not final: the stage's runtimes (thread counts)
  std::vector<int> started;    // the thread counts the stage starts
  std::vector<int> dropped;    // ... and drops
};

// The next step from `serving` (thread counts of the runtimes a new set may keep) with
// `free_cpus` CPUs free to the model, towards `target` (thread counts). `estimate(instances)`:
// what a stage of those runtimes serves; `need`: what the target must serve; `p99_bound_ms`:
// the p99 a drop must keep (StageP99BoundMs; infinite: capacity alone decides), but for the
// drops that free the next start's CPUs in a stage that starts nothing. Nullopt where no stage
// makes progress (nothing missing fits the free CPUs, and no drops that keep capacity free
// room for it): then only a plain switch gets there.
std::optional<MigrationStep> NextMigrationStep(
    const std::vector<int>& serving, int free_cpus, const std::vector<int>& target,
    const StageEstimator& estimate, double need,
    double p99_bound_ms = std::numeric_limits<double>::infinity());

// The p99 bound of a migration from `serving` to `target` (thread counts), fixed for all its
// stages so that they cannot creep up one drop at a time: kStageP99Slack above the worse p99
// of the two ends that are not overloaded (a move out of overload is bounded by its target);
// infinite where both are.
double StageP99BoundMs(const StageEstimator& estimate, const std::vector<int>& serving,
                       const std::vector<int>& target);

}  // namespace packrat
