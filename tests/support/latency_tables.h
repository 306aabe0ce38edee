// Profile latencies (ms) that tests choose, as latency(threads, batch): one table shared by the
// policy's unit tests (tests/agent/planning) and the agent's integration tests, which write it
// into stored profiles (profile_files.h). Nullopt: no such point.
#pragma once

#include <optional>

namespace packrat::testing {

// One thread: 100 ms + 100 ms a row; two threads run small batches twice as fast (batches of
// 1, 2, 4, 8 only).
inline std::optional<double> FatAtLowRates(int threads, int batch) {
  if (threads == 1) return 100.0 + 100.0 * batch;
  switch (batch) {
    case 1:
      return 100.0;
    case 2:
      return 150.0;
    case 4:
      return 300.0;
    case 8:
      return 560.0;
    default:
      return std::nullopt;
  }
}

}  // namespace packrat::testing
