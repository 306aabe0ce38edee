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

double StageP99BoundMs(const StageEstimator& estimate, const std::vector<int>& serving,
                       const std::vector<int>& target) {
  return (1 + kStageP99Slack) * std::max(estimate(serving).p99_ms, estimate(target).p99_ms);
}

std::optional<MigrationStep> NextMigrationStep(const std::vector<int>& serving, int free_cpus,
                                               const std::vector<int>& target,
                                               const StageEstimator& estimate, double need,
                                               double p99_bound_ms) {
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
  // Drop the largest extra runtimes the stage can spare, in capacity and in p99.
  std::vector<int> stays = extra;  // descending
  const double floor = std::min(need, estimate(instances(stays)).capacity);
  // A drop keeps a runtime and the capacity; `bounded`: the p99 too.
  auto droppable = [&](const std::vector<int>& rest, bool bounded) {
    const std::vector<int> stage = instances(rest);
    if (stage.empty()) return false;
    const StageEstimate without = estimate(stage);
    return without.capacity >= floor && (!bounded || without.p99_ms <= p99_bound_ms);
  };
  for (size_t i = 0; i < stays.size();) {
    std::vector<int> rest = stays;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    if (!droppable(rest, true)) {
      ++i;
      continue;
    }
    step.dropped.push_back(stays[i]);
    stays = std::move(rest);
  }
  // Where nothing starts and no drop keeps the p99: the fewest drops (largest first, keeping
  // capacity) that free the CPUs for the smallest missing runtime, which the next stage starts.
  if (step.started.empty() && step.dropped.empty() && !missing.empty()) {
    int freed = free_cpus;
    for (size_t i = 0; i < stays.size() && freed < missing.back();) {
      std::vector<int> rest = stays;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      if (!droppable(rest, false)) {
        ++i;
        continue;
      }
      freed += stays[i];
      step.dropped.push_back(stays[i]);
      stays = std::move(rest);
    }
  }
  if (step.started.empty() && step.dropped.empty()) return std::nullopt;
  step.instances = instances(stays);
  return step;
}

}  // namespace packrat
