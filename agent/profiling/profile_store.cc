#include "agent/profiling/profile_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/logging.h"

namespace packrat {

StatusOr<Profile> LoadProfileIfCurrent(const std::string& path, const ProfileKey& key,
                                       bool* reused) {
  *reused = false;
  std::ifstream key_in(path + ".key");
  if (!key_in || !std::filesystem::exists(path)) return Profile();
  std::string stored;
  std::getline(key_in, stored);
  if (stored != key.ToString()) {
    PACKRAT_LOG(INFO) << "profile " << path << " was measured under another key (" << stored
                      << "); measuring anew";
    return Profile();
  }
  ASSIGN_OR_RETURN(Profile profile, Profile::LoadCsv(path));
  *reused = true;
  return profile;
}

Status SaveProfile(const std::string& path, const ProfileKey& key, const Profile& profile) {
  RETURN_IF_ERROR(WriteFileAtomically(path + ".key", key.ToString() + "\n"));
  if (profile.empty()) return Status::Ok();
  return profile.WriteCsv(path);
}

StatusOr<Profile> LoadOrMeasureProfile(
    const std::string& dir, const ProfilerOptions& options, ProcessLauncher* launcher,
    const std::function<void(const ProfileProgress&)>& progress) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create profile folder '" + dir + "': " + ec.message());
  ASSIGN_OR_RETURN(ProfileKey key,
                   ComputeProfileKey(options.model.path, options.runtime_path,
                                     options.model.kernel.Key(), ProfileLoad(options)));
  const std::string path = dir + "/" + options.model.name + "-" + key.Digest() + ".csv";
  bool reused = false;
  ASSIGN_OR_RETURN(Profile profile, LoadProfileIfCurrent(path, key, &reused));
  size_t missing = 0;
  for (int t : options.threads) {
    for (int b : options.batches) missing += profile.Find(t, b) == nullptr ? 1 : 0;
  }
  if (missing == 0) {
    PACKRAT_LOG(INFO) << "model '" << options.model.name << "': using stored profile " << path;
    return profile;
  }
  PACKRAT_LOG(INFO) << "model '" << options.model.name << "': profiling " << missing
                    << " point(s) into " << path << (reused ? " (resuming)" : "");
  Profiler profiler(options, launcher);
  RETURN_IF_ERROR(profiler.Run(
      &profile, [&](const Profile& p) { return SaveProfile(path, key, p); }, progress));
  return profile;
}

StatusOr<Profile> LoadOrMeasureModelProfile(
    const ModelConfig& model, int threads, const std::vector<int>& cores,
    const std::string& runtime_path, const std::string& dir, ProcessLauncher* launcher,
    const std::function<void(const ProfileProgress&)>& progress) {
  ProfilerOptions profiling;
  profiling.model = model;
  profiling.runtime_path = runtime_path;
  profiling.cores = cores;
  const int profiled =
      std::min<int>(threads, cores.empty() ? threads : static_cast<int>(cores.size()));
  for (int t = 1; t <= profiled; ++t) profiling.threads.push_back(t);
  // Neighbours fill the plan's cores, not cores it leaves to others.
  if (static_cast<int>(profiling.cores.size()) > profiled) profiling.cores.resize(profiled);
  profiling.batches = PowersOfTwoUpTo(static_cast<int>(model.batching.max_batch));
  return LoadOrMeasureProfile(dir, profiling, launcher, progress);
}

}  // namespace packrat
