#include "agent/profiling/stage_profiler.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "agent/pool/runtime_options.h"
#include "agent/profiling/profile_key.h"
#include "agent/profiling/profiler.h"
#include "common/atomic_file.h"
#include "common/logging.h"

namespace packrat {

StatusOr<StageProfile> MeasureStageProfile(const StageProfilerOptions& options,
                                           ProcessLauncher* launcher) {
  if (options.max_batch < 1 || options.repeats < 1) {
    return InvalidArgument("a stage profile needs max_batch and repeats >= 1");
  }
  if (!options.cores.empty() && static_cast<int>(options.cores.size()) < options.threads) {
    return InvalidArgument("cannot profile " + std::to_string(options.threads) + " threads on " +
                           std::to_string(options.cores.size()) + " cores");
  }
  RuntimeInstanceOptions o = BatchRuntimeOptions(options.model, options.runtime_path);
  ForMeasurement(&o);
  o.model_name = options.model.name + "-stages";
  o.index = options.threads;
  o.threads = options.threads;
  o.batch = options.max_batch;
  if (!options.cores.empty()) {
    o.cores.assign(options.cores.begin(), options.cores.begin() + options.threads);
  }
  // One batch runs at a time, so the last timing reported is the batch just finished.
  auto last = std::make_shared<SliceTiming>();
  o.on_slice_computed = [last](const SliceTiming& t) { *last = t; };
  ASSIGN_OR_RETURN(std::unique_ptr<RuntimeInstance> instance, RuntimeInstance::Start(o, launcher));

  std::vector<StageProfile::Run> runs;
  for (int64_t b = 1; b <= options.max_batch; ++b) {
    ASSIGN_OR_RETURN(DecodedRequest decoded,
                     SyntheticRequest(options.model.inputs, static_cast<int>(b)));
    for (int i = 0; i <= options.repeats; ++i) {
      last->stages.clear();
      RETURN_IF_ERROR(TimeOneBatch(instance.get(), decoded).status());
      if (last->stages.empty()) {
        return FailedPrecondition("model '" + options.model.path +
                                  "' is not staged: layered batching needs a model whose "
                                  "forward() runs a `stages` ModuleList (see "
                                  "docs/configuration.md)");
      }
      if (i == 0) continue;  // untimed: the graph executor specialises for the new size
      StageProfile::Run run;
      run.batch = b;
      for (auto ns : last->stages) run.stage_ms.push_back(ns.count() / 1e6);
      runs.push_back(std::move(run));
    }
  }
  instance->Stop(std::chrono::seconds(10));
  return StageProfile::Create(std::move(runs));
}

StatusOr<StageProfile> LoadOrMeasureStageProfile(const std::string& dir,
                                                 const StageProfilerOptions& options,
                                                 ProcessLauncher* launcher) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create profile folder '" + dir + "': " + ec.message());
  ASSIGN_OR_RETURN(ProfileKey key, ComputeProfileKey(options.model.path, options.runtime_path,
                                                     options.model.kernel.Key(), "alone"));
  const std::string path = dir + "/" + options.model.name + "-" + key.Digest() + "-stages-t" +
                           std::to_string(options.threads) + ".csv";
  std::ifstream key_in(path + ".key");
  std::string stored;
  if (key_in && std::getline(key_in, stored) && stored == key.ToString()) {
    auto profile = StageProfile::LoadCsv(path);
    if (profile.ok()) {
      std::map<int64_t, int> runs_of;
      for (const auto& run : profile->runs()) ++runs_of[run.batch];
      bool enough = profile->max_batch() >= options.max_batch;
      for (int64_t b = 1; enough && b <= options.max_batch; ++b) {
        enough = runs_of[b] >= options.repeats;
      }
      if (enough) {
        PACKRAT_LOG(INFO) << "model '" << options.model.name << "': using stored stage profile "
                          << path;
        return profile;
      }
    }
  }
  PACKRAT_LOG(INFO) << "model '" << options.model.name << "': measuring the stage profile for "
                    << options.threads << " thread(s), batches 1.." << options.max_batch << " into "
                    << path;
  ASSIGN_OR_RETURN(StageProfile profile, MeasureStageProfile(options, launcher));
  RETURN_IF_ERROR(WriteFileAtomically(path + ".key", key.ToString() + "\n"));
  RETURN_IF_ERROR(profile.WriteCsv(path));
  return profile;
}

}  // namespace packrat
