#include "agent/model/share_shrink.h"

#include <algorithm>
#include <set>

namespace packrat {

std::vector<int> CpusToKeep(const std::vector<int>& share, int want,
                            const std::vector<std::vector<int>>& runtimes) {
  if (want >= static_cast<int>(share.size())) return share;
  const std::set<int> in_share(share.begin(), share.end());
  std::set<int> kept, held;
  for (const std::vector<int>& cpus : runtimes) held.insert(cpus.begin(), cpus.end());
  // Whole runtimes, largest first (stable: serving order among equals).
  std::vector<const std::vector<int>*> order;
  for (const std::vector<int>& cpus : runtimes) order.push_back(&cpus);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->size() > b->size(); });
  for (const std::vector<int>* cpus : order) {
    const bool inside = std::all_of(cpus->begin(), cpus->end(), [&](int c) {
      return in_share.count(c) > 0 && kept.count(c) == 0;
    });
    if (!inside || kept.size() + cpus->size() > static_cast<size_t>(want)) continue;
    kept.insert(cpus->begin(), cpus->end());
  }
  for (int pass = 0; pass < 2 && kept.size() < static_cast<size_t>(want); ++pass) {
    for (int c : share) {
      if (kept.size() >= static_cast<size_t>(want)) break;
      if (kept.count(c) || (pass == 0 && held.count(c))) continue;
      kept.insert(c);
    }
  }
  return {kept.begin(), kept.end()};
}

}  // namespace packrat
