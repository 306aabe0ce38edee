// Which cores each runtime is pinned to. (Cgroups, sockets and NUMA come with the allocator of
// issue 4; this is the sched_setaffinity placement the foundation needs.)
#pragma once

#include <cstddef>
#include <vector>

namespace packrat {

// The cores this process may run on (its affinity mask), ascending.
std::vector<int> AvailableCores();

// Gives each instance `threads[i]` distinct cores from `cores`, contiguously and in order,
// starting at cores[*cursor] and advancing *cursor. When the instances need more cores than
// there are, placement wraps around and cores are shared (the caller logs that).
std::vector<std::vector<int>> AssignCores(const std::vector<int>& cores,
                                          const std::vector<int>& threads, size_t* cursor);

}  // namespace packrat
