// SetDiff: which runtimes a new plan keeps, takes back from the parked ones and starts — the
// pure part of a reconfiguration (packrat-paper §3.7), apart from processes and locks.
//
// For a new plan `groups` over the serving set and the parked runtimes, in this order:
//   1. keep: live serving runtimes whose ⟨threads, b⟩ the new plan has, in serving order;
//   2. with resizable runtimes (their slabs hold batching.max_batch rows: any b up to their
//      capacity), also live serving runtimes of a thread count the plan has at another b, group
//      by group (only the dispatcher's cut changes for them);
//   3. unpark: live parked runtimes, the most recently parked first, that can serve a shape
//      still wanted (the same shape, or with resizable runtimes the same thread count and room
//      for its b) and whose CPUs no runtime kept or unparked before them runs on (they were
//      placed for another set);
//   4. start: every shape still wanted, group by group;
//   5. drop: the serving runtimes not kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "agent/planning/instance_group.h"

namespace packrat {

// One runtime as the diff sees it.
struct RuntimeShape {
  int threads = 1;
  int64_t batch = 1;     // the b it serves in its set (a parked one: the b it started for)
  int64_t capacity = 1;  // the most rows one slice may carry
  bool alive = true;
  std::vector<int> cpus;
};

struct SetDiff {
  std::vector<std::pair<size_t, int64_t>> keep;    // serving index, its b in the new set
  std::vector<std::pair<size_t, int64_t>> unpark;  // parked index, its b in the new set
  std::vector<std::pair<int, int64_t>> start;      // ⟨threads, b⟩ of each runtime to start
  std::vector<size_t> drop;                        // serving indices not kept
  size_t resized = 0;                              // kept at another b (rule 2)
  std::vector<int> kept_cpus;  // CPUs of every kept and unparked runtime (new ones avoid them)

  // Whether the new set is exactly the serving one (every runtime kept at its b).
  bool Unchanged(size_t serving_count) const {
    return start.empty() && unpark.empty() && resized == 0 && keep.size() == serving_count;
  }
};

// `serving` in set order; `parked` oldest first. `resizable`: rule 2 and the resizable part of
// rule 3 apply.
SetDiff DiffSets(const std::vector<RuntimeShape>& serving, const std::vector<RuntimeShape>& parked,
                 const std::vector<InstanceGroup>& groups, bool resizable);

}  // namespace packrat
