// Measures the stage profile of a staged model for layered batching (lbci-paper §3.1–3.2): one
// runtime pinned to `threads` cores runs batches of every size 1..max_batch through the same
// shared-memory path serving uses, `repeats` timed runs each after one untimed, and reports the
// time of every stage of every run (the runtime times its stages itself).
//
// Stored beside the model's ⟨t,b⟩ profile, keyed the same way (ProfileKey: model file,
// machine, kernel settings): `dir/<model>-<key digest>-stages-t<threads>.csv` with a `.key`
// file; reused when the key matches and it covers max_batch with enough repeats.
//
// Blocking: as long as the measurements (seconds for small models, a minute or two for
// ResNet-50 up to batch 16 on two cores).
#pragma once

#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/planning/stage_profile.h"
#include "agent/pool/process_launcher.h"
#include "common/status.h"

namespace packrat {

struct StageProfilerOptions {
  ModelConfig model;  // path, the one input, outputs, kernel settings
  std::string runtime_path;
  int threads = 1;
  std::vector<int> cores;  // pinned cores (the first `threads` are used); empty = any
  int64_t max_batch = 1;   // N
  int repeats = 5;         // n
};

StatusOr<StageProfile> MeasureStageProfile(const StageProfilerOptions& options,
                                           ProcessLauncher* launcher);

StatusOr<StageProfile> LoadOrMeasureStageProfile(const std::string& dir,
                                                 const StageProfilerOptions& options,
                                                 ProcessLauncher* launcher);

}  // namespace packrat
