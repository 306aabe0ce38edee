// Profiles on disk, keyed by model file, machine and kernel settings (ProfileKey): a profile
// file `P.csv` is accompanied by `P.csv.key` holding the key it was measured under. A profile
// whose key does not match is not reused; a partial one with a matching key is resumed.
#pragma once

#include <functional>
#include <string>

#include "agent/planning/profile.h"
#include "agent/profiling/profile_key.h"
#include "agent/profiling/profiler.h"

namespace packrat {

// Loads `path` if its key file matches `key`; otherwise an empty profile. `*reused` tells which
// (and is false also when the file did not exist). kInvalidArgument if a matching file is
// corrupt.
StatusOr<Profile> LoadProfileIfCurrent(const std::string& path, const ProfileKey& key,
                                       bool* reused);

// Writes the key file, then the profile (both atomically).
Status SaveProfile(const std::string& path, const ProfileKey& key, const Profile& profile);

// The stored profile of `model` for `options` (threads × batches) in `dir`
// (`dir/<model>-<key digest>.csv`), measuring whatever points are missing. Creates `dir`.
StatusOr<Profile> LoadOrMeasureProfile(const std::string& dir, const ProfilerOptions& options,
                                       ProcessLauncher* launcher,
                                       const std::function<void(const ProfileProgress&)>& progress);

// The profile an `instances: auto` model plans on for T = `threads`: thread counts 1..T (at most
// as many as `cores`, the CPUs the agent may use; empty: unpinned), the powers of two up to
// batching.max_batch, each point measured next to busy neighbours on the plan's cores (not on
// cores it leaves to others). Stored in `dir` and reused (LoadOrMeasureProfile).
StatusOr<Profile> LoadOrMeasureModelProfile(
    const ModelConfig& model, int threads, const std::vector<int>& cores,
    const std::string& runtime_path, const std::string& dir, ProcessLauncher* launcher,
    const std::function<void(const ProfileProgress&)>& progress);

}  // namespace packrat
