#include "agent/planning/optimizer.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>

namespace packrat {
namespace {

constexpr int32_t kUnreachable = std::numeric_limits<int32_t>::max();

// The additive tie-break key of a partial plan (see the header). A cell whose count is
// kUnreachable has no plan yet.
struct Cost {
  int32_t count;
  int32_t threads;
  double latency_sum;
};

inline bool Better(const Cost& a, const Cost& b) {
  if (a.count != b.count) return a.count < b.count;
  if (a.threads != b.threads) return a.threads < b.threads;
  return a.latency_sum < b.latency_sum;
}

// The profile's points minus those dominated by a point with the same batch, fewer threads and
// a latency no higher, sorted by (latency, threads, batch). A dominated point can be swapped
// for its dominator in any plan without raising the latency and with strictly fewer threads,
// so it never appears in an optimal plan under the tie-break.
std::vector<ProfilePoint> KnapsackItems(const Profile& profile) {
  std::map<int, double> lowest;  // batch -> lowest latency seen at fewer threads
  std::vector<ProfilePoint> items;
  for (const ProfilePoint& p : profile.points()) {  // threads ascending within each batch
    auto [it, inserted] = lowest.emplace(p.batch, p.latency_ms);
    if (!inserted) {
      if (it->second <= p.latency_ms) continue;
      it->second = p.latency_ms;
    }
    items.push_back(p);
  }
  std::sort(items.begin(), items.end(), [](const ProfilePoint& a, const ProfilePoint& b) {
    if (a.latency_ms != b.latency_ms) return a.latency_ms < b.latency_ms;
    if (a.threads != b.threads) return a.threads < b.threads;
    return a.batch < b.batch;
  });
  return items;
}

std::string JoinInts(const std::vector<int>& values, size_t limit) {
  std::string out;
  for (size_t i = 0; i < values.size() && i < limit; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  if (values.size() > limit) out += ",...";
  return out;
}

}  // namespace

int Plan::InstanceCount() const {
  int n = 0;
  for (const InstanceGroup& g : groups) n += g.count;
  return n;
}

int Plan::ThreadsUsed() const {
  int n = 0;
  for (const InstanceGroup& g : groups) n += g.count * g.threads;
  return n;
}

double Plan::ExpectedSpeedup() const {
  if (!fat_latency_ms.has_value() || latency_ms <= 0) return 0.0;
  return *fat_latency_ms / latency_ms;
}

std::string Plan::ConfigString() const {
  std::string out;
  for (const InstanceGroup& g : groups) {
    if (!out.empty()) out += ' ';
    out += '<' + std::to_string(g.count) + ',' + std::to_string(g.threads) + ',' +
           std::to_string(g.batch) + '>';
  }
  return out;
}

Optimizer::Optimizer(Profile profile)
    : profile_(std::move(profile)), items_(KnapsackItems(profile_)) {}

size_t Optimizer::CachedPlanCount() const {
  MutexLock lock(&mu_);
  return cache_.size();
}

Status Optimizer::CheckArguments(int threads, int batch) const {
  if (threads < 1) return InvalidArgument("threads must be >= 1, got " + std::to_string(threads));
  if (batch < 1) return InvalidArgument("batch must be >= 1, got " + std::to_string(batch));
  if ((int64_t{threads} + 1) * (int64_t{batch} + 1) > kMaxCells) {
    return InvalidArgument("threads=" + std::to_string(threads) +
                           " batch=" + std::to_string(batch) +
                           " is too large to plan: (threads+1)*(batch+1) "
                           "must not exceed " +
                           std::to_string(kMaxCells));
  }
  return Status::Ok();
}

Status Optimizer::Infeasible(int threads, std::string_view batch) const {
  std::string what =
      "no plan for threads=" + std::to_string(threads) + " and " + std::string(batch) + ": ";
  if (profile_.empty()) return NotFound(what + "the profile is empty");
  int min_threads = profile_.points().front().threads;
  return NotFound(what + "the batch cannot be split into profiled batch sizes {" +
                  JoinInts(profile_.Batches(), 16) + "} with at most " + std::to_string(threads) +
                  " threads in total (threads profiled: " + std::to_string(min_threads) + ".." +
                  std::to_string(profile_.MaxThreads()) + ")");
}

std::vector<std::optional<Plan>> Optimizer::Compute(int threads,
                                                    const std::vector<int>& targets) const {
  const int max_batch = targets.back();
  const size_t width = static_cast<size_t>(max_batch) + 1;
  const size_t cells = (static_cast<size_t>(threads) + 1) * width;

  // cost[t*width + b]: the best (by Cost) multiset of the items added so far with Σ threads ≤ t
  // and Σ batch = b; back[...] the item added last to it. Row t, column 0 is the empty plan.
  std::vector<Cost> cost(cells, Cost{kUnreachable, 0, 0.0});
  std::vector<int32_t> back(cells, -1);
  for (int t = 0; t <= threads; ++t) cost[t * width] = Cost{0, 0, 0.0};

  // Walks the back pointers from ⟨threads, batch⟩. Only valid right after the stage at which
  // that cell first became reachable: later stages may rewrite cells on its path.
  auto reconstruct = [&](int batch) {
    std::map<std::pair<int, int>, int> counts;  // ⟨threads,batch⟩ -> instances
    Plan plan;
    plan.threads_total = threads;
    plan.batch = batch;
    int t = threads;
    for (int b = batch; b > 0;) {
      const ProfilePoint& item = items_[back[t * width + b]];
      ++counts[{item.threads, item.batch}];
      plan.latency_ms = std::max(plan.latency_ms, item.latency_ms);
      t -= item.threads;
      b -= item.batch;
    }
    for (auto it = counts.rbegin(); it != counts.rend(); ++it) {  // threads desc, batch desc
      plan.groups.push_back(InstanceGroup{it->second, it->first.first, it->first.second});
    }
    plan.fat_latency_ms = profile_.Latency(threads, batch);
    return plan;
  };

  std::vector<std::optional<Plan>> plans(targets.size());
  std::vector<size_t> pending(targets.size());  // indices into targets still unreachable
  for (size_t i = 0; i < targets.size(); ++i) pending[i] = i;

  const Cost* const last_row = &cost[threads * width];
  size_t next = 0;
  while (next < items_.size() && !pending.empty()) {
    // One stage: every item with this latency, then read off the targets it made reachable.
    const double stage_latency = items_[next].latency_ms;
    for (; next < items_.size() && items_[next].latency_ms == stage_latency; ++next) {
      const ProfilePoint& item = items_[next];
      if (item.threads > threads || item.batch > max_batch) continue;
      const Cost step{1, item.threads, item.latency_ms};
      // Unbounded knapsack: row t reads row t - item.threads, already updated in this pass,
      // so the item may be used any number of times.
      for (int t = item.threads; t <= threads; ++t) {
        const Cost* src = &cost[(t - item.threads) * width];
        Cost* dst = &cost[t * width];
        int32_t* dst_back = &back[t * width];
        for (int b = item.batch; b <= max_batch; ++b) {
          const Cost& s = src[b - item.batch];
          if (s.count == kUnreachable) continue;
          const Cost c{s.count + step.count, s.threads + step.threads,
                       s.latency_sum + step.latency_sum};
          if (Better(c, dst[b])) {
            dst[b] = c;
            dst_back[b] = static_cast<int32_t>(next);
          }
        }
      }
    }
    std::erase_if(pending, [&](size_t i) {
      if (last_row[targets[i]].count == kUnreachable) return false;
      plans[i] = reconstruct(targets[i]);
      return true;
    });
  }
  return plans;
}

StatusOr<Plan> Optimizer::Solve(int threads, int batch) const {
  RETURN_IF_ERROR(CheckArguments(threads, batch));
  const std::pair<int, int> key(threads, batch);
  {
    MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  std::vector<std::optional<Plan>> plans = Compute(threads, {batch});
  if (!plans[0].has_value()) return Infeasible(threads, "batch=" + std::to_string(batch));
  MutexLock lock(&mu_);
  cache_.emplace(key, *plans[0]);
  return *std::move(plans[0]);
}

StatusOr<std::vector<Plan>> Optimizer::SolveAll(int threads, int max_batch) const {
  RETURN_IF_ERROR(CheckArguments(threads, max_batch));
  std::vector<int> targets(max_batch);
  for (int b = 1; b <= max_batch; ++b) targets[b - 1] = b;
  std::vector<Plan> result;
  for (std::optional<Plan>& plan : Compute(threads, targets)) {
    if (plan.has_value()) result.push_back(*std::move(plan));
  }
  if (result.empty()) {
    return Infeasible(threads, "any batch in 1.." + std::to_string(max_batch));
  }
  MutexLock lock(&mu_);
  for (const Plan& plan : result) cache_.emplace(std::pair(threads, plan.batch), plan);
  return result;
}

StatusOr<int> Optimizer::CheckInstances(const std::vector<int>& instance_threads, int batch) const {
  if (instance_threads.empty()) return InvalidArgument("no instances to plan on");
  if (*std::min_element(instance_threads.begin(), instance_threads.end()) < 1) {
    return InvalidArgument("every instance needs threads >= 1");
  }
  const int total = std::accumulate(instance_threads.begin(), instance_threads.end(), 0);
  RETURN_IF_ERROR(CheckArguments(total, batch));
  if ((int64_t{batch} + 1) * static_cast<int64_t>(instance_threads.size()) > kMaxCells) {
    return InvalidArgument("too many instances to plan on");
  }
  return total;
}

StatusOr<Plan> Optimizer::SolveOnInstances(const std::vector<int>& instance_threads,
                                           int batch) const {
  ASSIGN_OR_RETURN(const int total, CheckInstances(instance_threads, batch));
  const size_t n = instance_threads.size();
  const size_t width = static_cast<size_t>(batch) + 1;
  // The profiled ⟨b, latency⟩ of each instance's thread count, b ≤ batch.
  std::map<int, std::vector<std::pair<int, double>>> options;
  std::vector<double> thresholds;
  for (int t : instance_threads) {
    if (options.count(t)) continue;
    auto& points = options[t];
    for (const ProfilePoint& p : profile_.points()) {
      if (p.threads != t || p.batch > batch) continue;
      points.emplace_back(p.batch, p.latency_ms);
      thresholds.push_back(p.latency_ms);
    }
  }
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());

  // busy[k*width + r]: the fewest busy instances among the first k covering r rows, each at a
  // latency ≤ the threshold; choice[...] the b instance k-1 runs there (0 = idle).
  std::vector<int32_t> busy(width * (n + 1));
  std::vector<int32_t> choice(width * (n + 1));
  auto feasible = [&](double threshold) {
    std::fill(busy.begin(), busy.begin() + width, kUnreachable);
    busy[0] = 0;
    for (size_t k = 1; k <= n; ++k) {
      const int32_t* prev = &busy[(k - 1) * width];
      int32_t* cur = &busy[k * width];
      int32_t* pick = &choice[k * width];
      std::copy(prev, prev + width, cur);
      std::fill(pick, pick + width, 0);
      for (const auto& [b, latency] : options[instance_threads[k - 1]]) {
        if (latency > threshold) continue;
        for (int r = b; r <= batch; ++r) {
          if (prev[r - b] == kUnreachable || prev[r - b] + 1 >= cur[r]) continue;
          cur[r] = prev[r - b] + 1;
          pick[r] = b;
        }
      }
    }
    return busy[n * width + batch] != kUnreachable;
  };
  // Feasibility only grows with the threshold: the least one is found by bisection.
  size_t low = 0, high = thresholds.size();
  while (low < high) {
    const size_t mid = (low + high) / 2;
    if (feasible(thresholds[mid])) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  if (low == thresholds.size()) {
    std::vector<int> sorted = instance_threads;
    std::sort(sorted.begin(), sorted.end());
    return NotFound("no plan for batch=" + std::to_string(batch) + " on the instances' threads {" +
                    JoinInts(sorted, 16) + "}: no split into their profiled batch sizes covers it");
  }
  feasible(thresholds[low]);  // the tables of the least threshold, for the walk back
  std::map<std::pair<int, int>, int> counts;  // ⟨threads,batch⟩ -> instances
  Plan plan;
  plan.threads_total = total;
  plan.batch = batch;
  for (size_t k = n, r = static_cast<size_t>(batch); k > 0; --k) {
    const int b = choice[k * width + r];
    if (b == 0) continue;
    const int t = instance_threads[k - 1];
    ++counts[{t, b}];
    plan.latency_ms = std::max(plan.latency_ms, *profile_.Latency(t, b));
    r -= static_cast<size_t>(b);
  }
  for (auto it = counts.rbegin(); it != counts.rend(); ++it) {  // threads desc, batch desc
    plan.groups.push_back(InstanceGroup{it->second, it->first.first, it->first.second});
  }
  plan.fat_latency_ms = profile_.Latency(total, batch);
  return plan;
}

}  // namespace packrat
