#include "agent/planning/migration.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace packrat {
namespace {

// `from` less the elements of `what` (multisets, both sorted descending).
std::vector<int> Minus(const std::vector<int>& from, const std::vector<int>& what) {
  std::vector<int> out;
  std::set_difference(from.begin(), from.end(), what.begin(), what.end(), std::back_inserter(out),
                      std::greater<int>());
  return out;
}

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

}  // namespace

std::optional<MigrationStep> NextMigrationStep(
    const std::vector<int>& serving, int free_cpus, const std::vector<int>& target,
    const std::function<double(const std::vector<int>& instances)>& capacity, double need) {
  std::vector<int> have = serving, want = target;
  std::sort(have.begin(), have.end(), std::greater<int>());
  std::sort(want.begin(), want.end(), std::greater<int>());
  std::vector<int> kept;
  std::set_intersection(have.begin(), have.end(), want.begin(), want.end(),
                        std::back_inserter(kept), std::greater<int>());
  const std::vector<int> extra = Minus(have, kept);    // serving, not in the target
  const std::vector<int> missing = Minus(want, kept);  // in the target, not serving
  MigrationStep step;
  if (Sum(missing) <= free_cpus) {
    step.final = true;
    return step;
  }
  int room = free_cpus;
  for (int t : missing) {
    if (t <= room) {
      step.started.push_back(t);
      room -= t;
    }
  }
  auto instances = [&](const std::vector<int>& rest) {
    std::vector<int> all = kept;
    all.insert(all.end(), rest.begin(), rest.end());
    all.insert(all.end(), step.started.begin(), step.started.end());
    return all;
  };
  // Drop the largest extra runtimes the stage can spare.
  std::vector<int> stays = extra;  // descending
  const double floor = std::min(need, capacity(instances(stays)));
  for (size_t i = 0; i < stays.size();) {
    std::vector<int> rest = stays;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    if (capacity(instances(rest)) < floor) {
      ++i;
      continue;
    }
    step.dropped.push_back(stays[i]);
    stays = std::move(rest);
  }
  if (step.started.empty() && step.dropped.empty()) return std::nullopt;
  step.instances = instances(stays);
  return step;
}

}  // namespace packrat
