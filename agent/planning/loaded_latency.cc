#include "agent/planning/loaded_latency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace packrat {

int64_t LoadedBatchRows(double rate, int64_t b, const std::function<double(int64_t)>& latency_ms) {
  int64_t n = std::max<int64_t>(1, b);
  while (n > 1) {  // n falls strictly, so at most b rounds
    const double arriving = std::ceil(std::max(0.0, rate) * latency_ms(n) / 1e3);
    const int64_t next = std::max<int64_t>(1, static_cast<int64_t>(std::min<double>(arriving, b)));
    if (next >= n) break;
    n = next;
  }
  return n;
}

double LoadedLatencyMs(const Plan& plan, const Profile& profile, double rate,
                       const std::function<double(int threads)>& slowdown) {
  const int64_t b = std::max(1, plan.batch);
  const auto latency_ms = [&](int64_t rows) {
    double latency = 0;
    for (const InstanceGroup& g : plan.groups) {
      const int64_t share = std::max<int64_t>(1, (rows * g.batch + b - 1) / b);
      const double profiled =
          profile.InterpolatedLatency(g.threads, share).value_or(plan.latency_ms);
      latency = std::max(latency, profiled * slowdown(g.threads));
    }
    return latency;
  };
  return latency_ms(LoadedBatchRows(rate, b, latency_ms));
}

namespace {

// Calls `fn` with the optimizer's plan for `batch` rows on k identical instances of ⌊threads/k⌋
// threads, one per distinct thread count, fattest first, except one with best's groups.
void ForEachIdenticalPlan(const Optimizer& optimizer, int threads, int batch, const Plan& best,
                          const std::function<void(Plan)>& fn) {
  for (int t = threads; t >= 1; --t) {
    const int count = threads / t;
    if (t != threads / count) continue;  // ⌊threads/count⌋ is another t: one candidate each
    auto plan = optimizer.SolveOnInstances(std::vector<int>(count, t), batch);
    if (plan.ok() && plan->groups != best.groups) fn(std::move(plan).value());
  }
}

}  // namespace

std::optional<Plan> FasterAtRate(const Optimizer& optimizer, int threads, int batch,
                                 const Plan& best, double rate, double max_utilization,
                                 const std::function<double(int threads)>& slowdown,
                                 const std::function<double(const Plan& plan)>& latency_at_rate) {
  const Profile& profile = optimizer.profile();
  std::optional<Plan> faster;
  double fastest = latency_at_rate(best);
  ForEachIdenticalPlan(optimizer, threads, batch, best, [&](Plan plan) {
    const double full =
        LoadedLatencyMs(plan, profile, std::numeric_limits<double>::infinity(), slowdown);
    if (full <= 0 || rate > max_utilization * batch * 1e3 / full) return;
    if (const double loaded = latency_at_rate(plan); loaded < fastest) {
      fastest = loaded;
      faster = std::move(plan);
    }
  });
  return faster;
}

std::optional<Plan> MoreCapacity(const Optimizer& optimizer, int threads, int batch,
                                 const Plan& best, double min_gain,
                                 const std::function<double(int threads)>& slowdown) {
  const Profile& profile = optimizer.profile();
  auto capacity = [&](const Plan& plan) {
    const double full =
        LoadedLatencyMs(plan, profile, std::numeric_limits<double>::infinity(), slowdown);
    return full > 0 ? batch * 1e3 / full : 0.0;
  };
  std::optional<Plan> more;
  double most = min_gain * capacity(best);
  ForEachIdenticalPlan(optimizer, threads, batch, best, [&](Plan plan) {
    if (const double c = capacity(plan); c > most) {
      most = c;
      more = std::move(plan);
    }
  });
  return more;
}

std::optional<BurstPlan> MostBurstWithin(
    const Optimizer& optimizer, int threads, int batch, const Plan& best, double ceiling_ms,
    double near_most, const std::function<double(const Plan& plan)>& latency_at_rate,
    const std::function<double(const Plan& plan)>& burst) {
  std::vector<BurstPlan> within;
  auto consider = [&](Plan plan) {
    const double latency = latency_at_rate(plan);
    if (latency > ceiling_ms) return;
    const double rows_per_s = burst(plan);
    within.push_back({std::move(plan), latency, rows_per_s});
  };
  consider(best);
  ForEachIdenticalPlan(optimizer, threads, batch, best, consider);
  double most = 0;
  for (const BurstPlan& p : within) most = std::max(most, p.burst);
  std::optional<BurstPlan> pick;
  for (BurstPlan& p : within) {
    if (p.burst >= near_most * most && (!pick || p.latency_ms < pick->latency_ms)) {
      pick = std::move(p);
    }
  }
  return pick;
}

}  // namespace packrat
