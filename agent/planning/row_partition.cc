#include "agent/planning/row_partition.h"

#include <algorithm>
#include <numeric>

namespace packrat {

std::vector<int64_t> PartitionRows(int64_t rows, const std::vector<int64_t>& batch_sizes,
                                   const std::vector<size_t>& loads, size_t rotation) {
  const size_t n = batch_sizes.size();
  std::vector<int64_t> counts(n, 0);
  if (n == 0 || rows <= 0) return counts;
  const int64_t target = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  const int64_t rounds = rows / target;
  int64_t rest = rows % target;
  for (size_t i = 0; i < n; ++i) counts[i] = rounds * batch_sizes[i];
  if (rest == 0) return counts;
  // Proportional shares of the remainder, then one more row each by largest fraction.
  std::vector<int64_t> fraction(n);
  int64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t share = rest * batch_sizes[i] / target;
    fraction[i] = rest * batch_sizes[i] % target;
    counts[i] += share;
    given += share;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (fraction[a] != fraction[b]) return fraction[a] > fraction[b];
    const size_t la = a < loads.size() ? loads[a] : 0;
    const size_t lb = b < loads.size() ? loads[b] : 0;
    if (la != lb) return la < lb;
    return (a + n - rotation % n) % n < (b + n - rotation % n) % n;
  });
  for (size_t k = 0; given < rest; ++k, ++given) counts[order[k % n]] += 1;
  return counts;
}

}  // namespace packrat
