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
//     the next stage's free ones. A stage that can start nothing may still drop.
// The last stage is the target itself, once everything it starts fits on the free CPUs.
//
// Pure: thread counts in, thread counts out; the model's control thread carries the stages
// out (ModelController::Resize).
#pragma once

#include <functional>
#include <optional>
#include <vector>

namespace packrat {

struct MigrationStep {
  bool final = false;          // switch to the target: what it starts fits the free CPUs
  std::vector<int> instances;  // not final: the stage's runtimes (thread counts)
  std::vector<int> started;    // the thread counts the stage starts
  std::vector<int> dropped;    // ... and drops
};

// The next step from `serving` (thread counts of the runtimes a new set may keep) with
// `free_cpus` CPUs free to the model, towards `target` (thread counts). `capacity(instances)`:
// the rows/s a stage of those runtimes serves; `need`: what the target must serve. Nullopt
// where no stage makes progress (nothing missing fits the free CPUs and nothing can be
// dropped): then only a plain switch gets there.
std::optional<MigrationStep> NextMigrationStep(
    const std::vector<int>& serving, int free_cpus, const std::vector<int>& target,
    const std::function<double(const std::vector<int>& instances)>& capacity, double need);

}  // namespace packrat
