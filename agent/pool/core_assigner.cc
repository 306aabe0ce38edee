#include "agent/pool/core_assigner.h"

#include <sched.h>

#include <algorithm>

namespace packrat {

std::vector<int> AvailableCores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  return cores;
}

std::vector<std::vector<int>> AssignCores(const std::vector<int>& cores,
                                          const std::vector<int>& threads, size_t* cursor) {
  std::vector<std::vector<int>> out;
  for (int t : threads) {
    std::vector<int> mine;
    const size_t want = cores.empty() ? 0 : std::min<size_t>(t, cores.size());
    for (size_t k = 0; k < want; ++k) {
      mine.push_back(cores[*cursor % cores.size()]);
      ++*cursor;
    }
    out.push_back(std::move(mine));
  }
  return out;
}

}  // namespace packrat
