// Optimizer: picks the ⟨instances, threads, batch⟩ configuration that minimises predicted batch
// latency for a thread budget T and batch size B (Packrat paper §3.3 and appendix B).
//
// Problem. Given profiled single-instance latencies L[t,b], choose a multiset of instances
// ⟨t_k,b_k⟩, each a profiled point, with Σ t_k ≤ T and Σ b_k = B, minimising max_k L[t_k,b_k]
// (instances run concurrently, so a batch takes as long as its slowest slice). Cores may stay
// idle: a plan uses no more threads than its latency needs (see the tie-break). T may exceed the
// profile's largest thread count, since several instances share the budget; each instance's own
// ⟨t,b⟩ is always a profiled point.
//
// Tie-break (exact, documented contract). Among all multisets with the minimal latency the
// optimizer returns the one with
//   1. the fewest instances (fewer processes, less memory and interference), then
//   2. the fewest threads in total (cores left idle for other work), then
//   3. the smallest sum of instance latencies (the most slack on the non-bottleneck instances);
// any tie that remains is broken by a fixed internal order of the profile points, so a plan
// depends only on the profile and ⟨T,B⟩.
//
// Algorithm. A 2-D unbounded knapsack over (threads ≤ t, rows = b). The paper's recurrence
//   opt[t][b] = min over profiled ⟨t',b'⟩ of max(opt[t−t'][b−b'], L[t',b'])
// computes only the min-max latency; a plain lexicographic key on it does not yield the
// tie-break above exactly (a sub-plan with lower latency but more instances can win a cell and
// lose after the max). Instead the items are added in ascending latency order: after adding all
// items with latency ≤ ℓ the table holds, for every cell, the best plan by the additive key
// (instances, threads, latency sum) using only those items; the first ℓ at which cell ⟨T,B⟩
// becomes reachable is exactly opt[T][B], and the plan stored there is the tie-break winner.
// Each item costs one forward pass over the table, so the work is O(|items| · T · B), the same as
// the paper's DP, and a single query stops at the first ℓ that reaches its cell. Items dominated by
// a point with the same batch, fewer threads and no higher latency are dropped first; that never
// changes a result.
//
// Cost: a cold Solve blocks its caller for the DP (about 7 ms for T=128, B=1024 with a 16-thread
// profile on one core; docs/benchmarks.md), so servers call it off their I/O threads.
//
// Thread-safety: all methods are const and thread-safe. Solutions are cached per ⟨T,B⟩ (one
// Optimizer per model profile, so per ⟨model,T,B⟩); the cache grows by one Plan per distinct
// ⟨T,B⟩ asked and is never evicted. Solving runs outside the lock, so concurrent callers never
// wait for each other's DP (two racing misses on the same key both compute the same plan).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/planning/instance_group.h"
#include "agent/planning/profile.h"
#include "common/mutex.h"
#include "common/status.h"

namespace packrat {

// `count` identical instances, each running `batch` rows with `threads` intra-op threads.
struct Plan {
  int threads_total = 0;  // T, the thread budget the plan was solved for (≥ ThreadsUsed())
  int batch = 0;          // B = Σ count·batch
  double latency_ms = 0;  // predicted batch latency: max over groups of L[threads, batch]
  std::optional<double> fat_latency_ms;  // L[T,B], one instance with all threads, if profiled
  // Sorted by threads descending, then batch descending; no two groups share ⟨threads,batch⟩.
  std::vector<InstanceGroup> groups;

  int InstanceCount() const;  // Σ count
  int ThreadsUsed() const;    // Σ count·threads
  // fat_latency_ms / latency_ms: the speedup over the fat instance predicted from the profile
  // (paper §5.1). 0 when fat_latency_ms is unknown.
  double ExpectedSpeedup() const;
  // The paper's notation, e.g. "<4,4,16>" or "<1,6,8> <2,4,4>" (⟨instances,threads,batch⟩).
  std::string ConfigString() const;

  bool operator==(const Plan&) const = default;
};

class Optimizer {
 public:
  // The DP table has (T+1)·(B+1) cells; larger problems are rejected (about 80 MiB of table).
  static constexpr int64_t kMaxCells = int64_t{1} << 22;

  // Takes the model's profile; an empty profile yields NotFound from every Solve.
  explicit Optimizer(Profile profile);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The best plan for `threads` (T) and `batch` (B), from the cache when it has been solved.
  // Errors: kInvalidArgument if T < 1, B < 1 or the table would exceed kMaxCells;
  // kNotFound if no multiset of profiled points covers exactly B rows within T threads (e.g. B
  // is odd and only even batches are profiled).
  StatusOr<Plan> Solve(int threads, int batch) const;

  // Plans for every B in 1..max_batch at T = `threads` from one DP pass (cost of one
  // Solve(threads, max_batch)), ascending by B, and caches them all. B values that no plan can
  // cover are left out; kNotFound if that is every B. kInvalidArgument as for Solve().
  StatusOr<std::vector<Plan>> SolveAll(int threads, int max_batch) const;

  // The best plan on instances that exist already: one entry per instance, its thread count.
  // Each instance runs a profiled ⟨t,b⟩ at its own t or stays idle; the busy ones cover exactly
  // `batch` rows with the least max latency, then with the fewest busy instances (remaining
  // ties by a fixed order). For a server weighing a plan that keeps its running instances
  // against one that starts new ones. Not cached; cost O(instances · batch · profiled batch
  // sizes · log(profiled points)). kInvalidArgument for no instances, a thread count < 1 or
  // batch < 1 (or beyond kMaxCells); kNotFound if no assignment covers `batch`.
  StatusOr<Plan> SolveOnInstances(const std::vector<int>& instance_threads, int batch) const;

  const Profile& profile() const { return profile_; }
  size_t CachedPlanCount() const;

 private:
  // Runs the DP for T = `threads` and all B ≤ max(targets); returns one entry per target
  // (ascending, unique), nullopt where the target batch is unreachable.
  std::vector<std::optional<Plan>> Compute(int threads, const std::vector<int>& targets) const;
  Status CheckArguments(int threads, int batch) const;
  // SolveOnInstances' arguments: the instances' total threads, or kInvalidArgument.
  StatusOr<int> CheckInstances(const std::vector<int>& instance_threads, int batch) const;
  // kNotFound explaining why no plan covers `batch` (a description such as "batch=7").
  Status Infeasible(int threads, std::string_view batch) const;

  const Profile profile_;
  // Non-dominated profile points sorted by (latency, threads, batch): the DP's item order.
  std::vector<ProfilePoint> items_;

  mutable Mutex mu_;
  mutable std::map<std::pair<int, int>, Plan> cache_ GUARDED_BY(mu_);  // key ⟨T,B⟩
};

}  // namespace packrat
