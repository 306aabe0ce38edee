#include "agent/model/set_diff.h"

#include <algorithm>
#include <map>

namespace packrat {

SetDiff DiffSets(const std::vector<RuntimeShape>& serving, const std::vector<RuntimeShape>& parked,
                 const std::vector<InstanceGroup>& groups, bool resizable) {
  SetDiff diff;
  std::map<std::pair<int, int64_t>, int> wanted;
  for (const InstanceGroup& g : groups) wanted[{g.threads, g.batch}] += g.count;
  std::vector<bool> taken(serving.size(), false);
  auto hold_cpus = [&](const RuntimeShape& r) {
    diff.kept_cpus.insert(diff.kept_cpus.end(), r.cpus.begin(), r.cpus.end());
  };
  // 1. The same shape.
  for (size_t i = 0; i < serving.size(); ++i) {
    int& n = wanted[{serving[i].threads, serving[i].batch}];
    if (n > 0 && serving[i].alive) {
      --n;
      taken[i] = true;
      diff.keep.emplace_back(i, serving[i].batch);
      hold_cpus(serving[i]);
    }
  }
  // 2. The same thread count at another b.
  for (const InstanceGroup& g : groups) {
    if (!resizable) break;
    int& n = wanted[{g.threads, g.batch}];
    for (size_t i = 0; i < serving.size() && n > 0; ++i) {
      const RuntimeShape& r = serving[i];
      if (taken[i] || !r.alive || r.threads != g.threads || r.capacity < g.batch) continue;
      --n;
      ++diff.resized;
      taken[i] = true;
      diff.keep.emplace_back(i, g.batch);
      hold_cpus(r);
    }
  }
  // 3. Parked runtimes, the most recently parked first, on CPUs nobody kept runs on.
  std::vector<bool> unparked(parked.size(), false);
  for (const InstanceGroup& g : groups) {
    int& n = wanted[{g.threads, g.batch}];
    for (size_t i = parked.size(); i-- > 0 && n > 0;) {
      const RuntimeShape& r = parked[i];
      if (unparked[i] || !r.alive || r.threads != g.threads) continue;
      if (r.batch != g.batch && !(resizable && r.capacity >= g.batch)) continue;
      const bool overlaps = std::any_of(r.cpus.begin(), r.cpus.end(), [&](int cpu) {
        return std::find(diff.kept_cpus.begin(), diff.kept_cpus.end(), cpu) != diff.kept_cpus.end();
      });
      if (overlaps) continue;
      --n;
      unparked[i] = true;
      diff.unpark.emplace_back(i, g.batch);
      hold_cpus(r);
    }
  }
  // 4. Start the rest.
  for (const InstanceGroup& g : groups) {
    for (int& n = wanted[{g.threads, g.batch}]; n > 0; --n) diff.start.emplace_back(g.threads, g.batch);
  }
  // 5. Drop the serving runtimes not kept.
  for (size_t i = 0; i < serving.size(); ++i) {
    if (!taken[i]) diff.drop.push_back(i);
  }
  return diff;
}

}  // namespace packrat
