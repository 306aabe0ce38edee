// Which CPUs a model keeps when the node partition shrinks its share (NodeController::Move).
// Its runtimes run on CPUs of the share; a runtime with a CPU outside the smaller share can
// neither be kept nor stay parked, so the CPUs kept decide how much of the serving set survives
// the shrink without a start. Pure.
#pragma once

#include <vector>

namespace packrat {

// `want` CPUs of `share` (ascending) to keep, ascending: first the CPUs of whole runtimes
// (`runtimes`: each serving runtime's CPUs, in serving order), largest first while they fit;
// then CPUs no runtime holds; then the rest, ascending. `want` ≥ share.size(): all of it.
std::vector<int> CpusToKeep(const std::vector<int>& share, int want,
                            const std::vector<std::vector<int>>& runtimes);

}  // namespace packrat
