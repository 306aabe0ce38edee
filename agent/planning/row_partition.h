// How the dispatcher shares a batch's rows between the instances of a plan: one function for the
// dispatcher (agent/batching/dispatcher.h) and for the batching simulator that models it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packrat {

// How many rows each instance gets from a batch of `rows`. Full rounds of every instance's
// batch size first; a remainder r < B is shared in proportion to the batch sizes (largest
// remainder), ties going to the least-loaded instance, then the lowest index after `rotation`.
// Returns one count per instance; counts beyond what an instance runs at once mean several
// slices.
std::vector<int64_t> PartitionRows(int64_t rows, const std::vector<int64_t>& batch_sizes,
                                   const std::vector<size_t>& loads, size_t rotation);

}  // namespace packrat
