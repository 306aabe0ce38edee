#include "agent/planning/batching_simulator.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>

#include "agent/planning/row_partition.h"

namespace packrat {

BatchingSimulator::BatchingSimulator(int requests, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0);
  unit_arrivals_.resize(std::max(100, requests));
  double t = 0;
  for (double& arrival : unit_arrivals_) arrival = t += gap(rng);
}

BatchingSimulator::Result BatchingSimulator::Run(const std::vector<Instance>& instances,
                                                 const Options& options, double rate,
                                                 const SliceLatency& slice_ms) const {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const size_t n = unit_arrivals_.size();
  const double ms_per_unit = 1e3 / std::max(rate, 1e-9);
  const auto arrival = [&](size_t i) { return unit_arrivals_[i] * ms_per_unit; };
  const int64_t target = std::max<int64_t>(1, options.target_rows);
  const int64_t max_rows = std::max(target, options.max_rows);
  const double max_delay_ms = std::chrono::duration<double, std::milli>(options.max_delay).count();
  const size_t depth = static_cast<size_t>(std::max(1, options.max_inflight_batches));

  std::vector<int64_t> batch_sizes;
  for (const Instance& instance : instances)
    batch_sizes.push_back(std::max<int64_t>(1, instance.batch));
  // Each instance runs its slices in order: when it frees up, and when each queued or running
  // slice ends (the slices it holds, as the dispatcher counts them).
  std::vector<double> free_at(instances.size(), 0.0);
  std::vector<std::deque<double>> slice_ends(instances.size());
  using End = std::pair<double, size_t>;  // a slice's end and its instance
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  int64_t room = 0;  // Dispatcher::Room: Σ (depth − slices held) × b
  for (int64_t b : batch_sizes) room += static_cast<int64_t>(depth) * b;
  std::vector<double> latencies;
  latencies.reserve(n);
  size_t arrived = 0;  // rows [0, arrived) have arrived
  size_t queued = 0;   // rows [queued, arrived) wait
  size_t rotation = 0;
  int64_t batches = 0;
  double batch_ms_sum = 0;  // of each batch's longest slice
  double now = 0;
  while (queued < n && !instances.empty()) {
    const double next_arrival = arrived < n ? arrival(arrived) : kNever;
    const double next_end = ends.empty() ? kNever : ends.top().first;
    double due = kNever;
    if (queued < arrived && room > 0) {  // BatchAggregator::Poll
      due = static_cast<int64_t>(arrived - queued) >= std::min(target, room)
                ? now
                : std::max(now, arrival(queued) + max_delay_ms);
    }
    now = std::min({next_arrival, next_end, due});
    if (next_end <= now) {  // room first, as on_room wakes the scheduler
      const size_t i = ends.top().second;
      ends.pop();
      slice_ends[i].pop_front();
      if (slice_ends[i].size() < depth) room += batch_sizes[i];
      continue;
    }
    if (next_arrival <= now) {
      ++arrived;
      continue;
    }
    // Cut a batch for the room and share it as Dispatcher::Dispatch does.
    const int64_t limit = room < target ? std::max<int64_t>(1, max_rows * room / target) : max_rows;
    const int64_t rows = std::min<int64_t>(static_cast<int64_t>(arrived - queued), limit);
    std::vector<size_t> loads(instances.size());
    std::vector<int64_t> shares(instances.size());
    for (size_t i = 0; i < instances.size(); ++i) {
      loads[i] = slice_ends[i].size();
      shares[i] = static_cast<int64_t>(depth - std::min(depth, loads[i])) * batch_sizes[i];
    }
    std::vector<int64_t> left = PartitionRows(rows, shares, loads, rotation++);
    double longest_slice = 0;
    for (bool more = true; more;) {  // round-robin slices, rows in arrival order
      more = false;
      for (size_t i = 0; i < instances.size(); ++i) {
        if (left[i] == 0) continue;
        const int64_t slice = std::min(left[i], batch_sizes[i]);
        const double took = slice_ms(instances[i].threads, slice);
        const double end = std::max(free_at[i], now) + took;
        longest_slice = std::max(longest_slice, took);
        free_at[i] = end;
        if (slice_ends[i].size() < depth) room -= batch_sizes[i];
        slice_ends[i].push_back(end);
        ends.push({end, i});
        for (int64_t r = 0; r < slice; ++r) latencies.push_back(end - arrival(queued++));
        left[i] -= slice;
        more = more || left[i] > 0;
      }
    }
    batch_ms_sum += longest_slice;
    ++batches;
  }

  return Summarize(&latencies, batches, batch_ms_sum);
}

BatchingSimulator::Result BatchingSimulator::Summarize(std::vector<double>* latencies,
                                                       int64_t batches, double batch_ms_sum) {
  Result result;
  if (latencies->empty()) {
    result.p50_ms = result.p99_ms = result.mean_ms = result.mean_batch_ms =
        std::numeric_limits<double>::infinity();
    return result;
  }
  double sum = 0;
  for (double l : *latencies) sum += l;
  const double count = static_cast<double>(latencies->size());
  result.mean_ms = sum / count;
  result.mean_batch_rows = count / static_cast<double>(batches);
  result.mean_batch_ms = batch_ms_sum / static_cast<double>(batches);
  const auto quantile = [&](double q) {
    auto at = latencies->begin() + static_cast<std::ptrdiff_t>(q * (count - 1));
    std::nth_element(latencies->begin(), at, latencies->end());
    return *at;
  };
  result.p50_ms = quantile(0.5);
  result.p99_ms = quantile(0.99);
  return result;
}

double BatchingSimulator::Capacity(const std::vector<Instance>& instances,
                                   const SliceLatency& slice_ms) {
  double rows_per_s = 0;
  for (const Instance& instance : instances) {
    const int64_t b = std::max<int64_t>(1, instance.batch);
    rows_per_s += static_cast<double>(b) * 1e3 / slice_ms(instance.threads, b);
  }
  return rows_per_s;
}

double BatchingSimulator::MaxRate(const std::vector<Instance>& instances, const Options& options,
                                  double p99_ms, const SliceLatency& slice_ms) const {
  if (instances.empty()) return 0;
  const auto meets = [&](double rate) {
    return Run(instances, options, rate, slice_ms).p99_ms <= p99_ms;
  };
  double high = Capacity(instances, slice_ms);
  if (meets(high)) return high;
  double low = high * 1e-3;
  if (!meets(low)) return 0;
  while (high - low > 0.005 * high) {  // invariant: low meets the target, high does not
    const double mid = (low + high) / 2;
    (meets(mid) ? low : high) = mid;
  }
  return low;
}

}  // namespace packrat
