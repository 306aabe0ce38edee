// Rewriting the profiles an agent stored, so that a test's plans follow latencies it chooses
// (the agent reuses a stored profile whose key matches: docs/operations.md, "Profiles").
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace packrat::testing {

// Replaces the latencies of every profile (*.csv) in `dir` with `latency(threads, batch)`;
// returns the rows rewritten, or -1 if a row has no replacement (that file is left as it was).
// Not thread-safe against an agent writing `dir`: call it while none runs.
int RewriteProfiles(const std::string& dir,
                    const std::function<std::optional<double>(int, int)>& latency);

}  // namespace packrat::testing
