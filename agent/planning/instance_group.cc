#include "agent/planning/instance_group.h"

#include <string>

namespace packrat {

Status ValidatePlanGroups(const std::vector<InstanceGroup>& groups, int thread_budget,
                          std::string_view cores) {
  if (groups.empty()) return InvalidArgument("the plan has no instances");
  int64_t threads = 0;
  int64_t instances = 0;
  for (const InstanceGroup& g : groups) {
    if (g.count < 1 || g.threads < 1 || g.batch < 1) {
      return InvalidArgument("every instance group needs count, threads and batch >= 1");
    }
    if (g.count > kMaxPlanInstances || g.threads > 4096 || g.batch > (1 << 16)) {
      return InvalidArgument(
          "instance group out of range (count <= 1024, threads <= 4096, batch <= 65536)");
    }
    threads += int64_t{g.count} * g.threads;
    instances += g.count;
  }
  if (instances > kMaxPlanInstances) {
    return InvalidArgument("the plan has " + std::to_string(instances) + " instances; at most " +
                           std::to_string(kMaxPlanInstances));
  }
  if (thread_budget > 0 && threads > thread_budget) {
    return InvalidArgument("the plan needs " + std::to_string(threads) + " threads; only " +
                           std::to_string(thread_budget) + " core(s) are usable (" +
                           std::string(cores) + ")");
  }
  return Status::Ok();
}

}  // namespace packrat
