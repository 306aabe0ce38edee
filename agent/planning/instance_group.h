// ⟨count, threads, batch⟩: `count` instances, each with `threads` intra-op threads, each
// running batches of `batch` rows. A plan (from the optimizer or the config) is a list of them.
#pragma once

#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat {

struct InstanceGroup {
  int count = 0;
  int threads = 0;
  int batch = 0;

  bool operator==(const InstanceGroup&) const = default;
};

// The most instances a plan may have (and so of one group).
inline constexpr int64_t kMaxPlanInstances = 1024;

// InvalidArgument unless `groups` is a plan the agent can serve: not empty; every count,
// threads and batch >= 1 and within range (count <= 1024, threads <= 4096, batch <= 65536); at
// most kMaxPlanInstances instances; and, with a `thread_budget` > 0, Σ count·threads within it
// (`cores` describes the usable cores for the message).
Status ValidatePlanGroups(const std::vector<InstanceGroup>& groups, int thread_budget,
                          std::string_view cores);

}  // namespace packrat
