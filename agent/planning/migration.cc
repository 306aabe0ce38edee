#include "agent/planning/migration.h"

#include <algorithm>
#include <functional>
#include <limits>
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
  double worst = -1;
  for (const StageEstimate& end : {estimate(serving), estimate(target)}) {
    if (!end.overloaded) worst = std::max(worst, end.p99_ms);
  }
  return worst < 0 ? std::numeric_limits<double>::infinity() : (1 + kStageP99Slack) * worst;
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
  // Drop the largest extra runtimes the stage can spare, in capacity and, where `bounded`, in
  // p99. Runtimes of one thread count are alike: where one cannot go, none of them can.
  std::vector<int> stays = extra;  // descending
  const double floor = std::min(need, estimate(instances(stays)).capacity);
  auto drop = [&](bool bounded, int enough) {
    int freed = 0;
    for (size_t i = 0; i < stays.size() && freed < enough;) {
      std::vector<int> rest = stays;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      const std::vector<int> stage = instances(rest);
      bool ok = !stage.empty();
      if (ok) {
        const StageEstimate without = estimate(stage);
        const double p99 =
            without.overloaded ? std::numeric_limits<double>::infinity() : without.p99_ms;
        ok = without.capacity >= floor && (!bounded || p99 <= p99_bound_ms);
      }
      if (!ok) {
        const int t = stays[i];
        while (i < stays.size() && stays[i] == t) ++i;
        continue;
      }
      freed += stays[i];
      step.dropped.push_back(stays[i]);
      stays = std::move(rest);
    }
    return freed;
  };
  int freed = drop(true, std::numeric_limits<int>::max());
  // A stage that starts nothing is worth its switch only if it frees the CPUs for the smallest
  // missing runtime, which the next stage starts: where the bounded drops fall short, the
  // fewest more that keep capacity (largest first); where even those fall short, no stage.
  if (step.started.empty() && !missing.empty()) {
    const int short_by = missing.back() - free_cpus - freed;
    if (short_by > 0 && drop(false, short_by) < short_by) return std::nullopt;
  }
  if (step.started.empty() && step.dropped.empty()) return std::nullopt;
  step.instances = instances(stays);
  return step;
}

}  // namespace packrat
