#include "agent/model/model_repository.h"

#include <algorithm>
#include <filesystem>

#include "agent/model/served_model.h"
#include "agent/pool/cpu_list.h"
#include "common/logging.h"

namespace packrat {
namespace {

// Folder names a model may have (the config's name rule); anything else is never a path.
bool ValidName(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Σ count × threads of an explicit plan.
int PlanThreads(const ModelConfig& config) {
  int threads = 0;
  for (const InstanceGroup& g : config.instances) threads += g.count * g.threads;
  return threads;
}

}  // namespace

ModelRepository::ModelRepository(ModelRegistry* registry, ModelRepositoryOptions options)
    : registry_(registry), options_(std::move(options)) {}

ModelRepository::~ModelRepository() { Shutdown(); }

void ModelRepository::Shutdown() {
  MutexLock lock(&mu_);
  shut_down_ = true;
  while (in_flight_ > 0) changed_.Wait(&mu_);
}

std::vector<std::string> ModelRepository::Folders() const {
  std::vector<std::string> out;
  if (options_.dir.empty()) return out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (e.is_directory(ec) && ValidName(e.path().filename().string())) {
      out.push_back(e.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ModelRepository::ExpectAll() {
  if (!options_.load_all) return;
  for (const std::string& name : Folders()) {
    if (registry_->Find(name) == nullptr) registry_->BeginTransition(name, "loading");
  }
}

ModelRepository::StartLoad ModelRepository::LoadAll() {
  StartLoad result;
  if (!options_.load_all) return result;
  for (const std::string& name : Folders()) {
    if (registry_->Find(name) != nullptr) {
      PACKRAT_LOG(WARNING) << "model repository: '" << name
                           << "' is also in the main config, which wins at start (a load of it "
                              "replaces it with the folder's)";
      continue;
    }
    ++result.tried;
    if (Status s = Load(name); !s.ok()) {
      PACKRAT_LOG(ERROR) << "model repository: '" << name << "' did not load: " << s.message();
      registry_->FailedAtStart(name, s.message());
      if (result.first_failure.ok()) result.first_failure = s.WithContext("model '" + name + "'");
    } else {
      ++result.loaded;
    }
  }
  return result;
}

std::vector<RepositoryModel> ModelRepository::Index(bool ready_only) {
  std::map<std::string, RepositoryModel> out;
  for (const std::string& name : Folders()) {
    RepositoryModel& m = out[name];
    m.name = name;
    m.state = "UNAVAILABLE";
    m.reason = std::filesystem::exists(std::filesystem::path(options_.dir) / name / "model.yaml")
                   ? "not loaded"
                   : "no model.yaml in " + (std::filesystem::path(options_.dir) / name).string();
  }
  for (const std::shared_ptr<ServedModel>& model : registry_->List()) {
    RepositoryModel& m = out[model->name()];
    m.name = model->name();
    m.version = model->signature().version;
    switch (model->state()) {
      case ModelState::kReady:
        m.state = "READY";
        m.reason.clear();
        break;
      case ModelState::kLoading:
        m.state = "LOADING";
        m.reason.clear();
        break;
      case ModelState::kFailed:
        m.state = "UNAVAILABLE";
        m.reason = model->failure();
        break;
      case ModelState::kStopped:
        m.state = "UNAVAILABLE";
        m.reason = "stopped";
        break;
    }
    if (model->unloading()) m.state = "UNLOADING";
  }
  {
    MutexLock lock(&mu_);
    for (const auto& [name, e] : entries_) {
      auto it = out.find(name);
      if (it == out.end()) continue;  // its folder is gone and it is not loaded
      RepositoryModel& m = it->second;
      if (e.busy && e.loading) {
        m.state = "LOADING";
        m.reason.clear();
      } else if (m.state == "UNAVAILABLE" && !e.reason.empty()) {
        m.reason = e.reason;
      }
    }
  }
  std::vector<RepositoryModel> list;
  for (auto& [name, m] : out) {
    if (!ready_only || m.state == "READY") list.push_back(std::move(m));
  }
  return list;
}

Status ModelRepository::Begin(const std::string& name, bool loading) {
  MutexLock lock(&mu_);
  while (!shut_down_ && entries_[name].busy) changed_.Wait(&mu_);
  if (shut_down_) return Unavailable("the agent is shutting down");
  Entry& e = entries_[name];
  e.busy = true;
  e.loading = loading;
  ++in_flight_;
  return Status::Ok();
}

void ModelRepository::End(const std::string& name, const Status& result) {
  MutexLock lock(&mu_);
  Entry& e = entries_[name];
  e.busy = false;
  e.loading = false;
  e.reason = result.ok() ? std::string() : result.message();
  --in_flight_;
  changed_.NotifyAll();
}

Status ModelRepository::Load(const std::string& name) {
  if (!ValidName(name)) return InvalidArgument("'" + name + "' is not a model name");
  if (options_.dir.empty()) {
    return FailedPrecondition("no model repository (server.model_repository) to load '" + name +
                              "' from");
  }
  const bool first = registry_->Find(name) == nullptr;
  if (Status s = Begin(name, /*loading=*/first); !s.ok()) {
    registry_->EndTransition(name);  // ExpectAll's, at a shutdown during start
    return s;
  }
  if (first) registry_->BeginTransition(name, "loading");
  const Status result = DoLoad(name);
  if (first) registry_->EndTransition(name);
  End(name, result);
  return result;
}

StatusOr<std::vector<int>> ModelRepository::ShareFor(const ModelConfig& config) const {
  std::vector<int> free = options_.allocator->FreeCpus();
  int need = 0;
  if (!config.auto_instances) {
    need = PlanThreads(config);
  } else if (config.auto_threads > 0) {
    need = config.auto_threads;
  } else {
    // Every free CPU, at least its floor: the node partition, where two or more such models
    // share the node, moves CPUs between them by load afterwards.
    need = std::max(1, config.min_threads);
    if (static_cast<int>(free.size()) < need && options_.make_room) {
      RETURN_IF_ERROR(options_.make_room(config.name, need));
      free = options_.allocator->FreeCpus();
    }
    need = std::max(need, static_cast<int>(free.size()));
  }
  if (static_cast<int>(free.size()) < need) {
    std::string held;
    for (const auto& [model, cpus] : options_.allocator->Shares()) {
      held += (held.empty() ? "" : ", ") + model + ": " + FormatCpuList(cpus);
    }
    return ResourceExhausted(
        "model '" + config.name + "' needs " + std::to_string(need) + " CPU(s) and " +
        std::to_string(free.size()) + " are free (" +
        (free.empty() ? std::string("none") : FormatCpuList(free)) +
        "); held: " + (held.empty() ? std::string("every CPU by the main config's models") : held));
  }
  return std::vector<int>(free.begin(), free.begin() + need);
}

Status ModelRepository::DoLoad(const std::string& name) {
  const LogScope log_scope(name);
  const std::string folder = (std::filesystem::path(options_.dir) / name).string();
  if (!std::filesystem::is_directory(folder)) {
    return NotFound("no folder '" + name + "' in the model repository " + options_.dir);
  }
  ASSIGN_OR_RETURN(ModelConfig config, LoadRepositoryModel(folder));
  if (!config.emulate.enabled && !std::filesystem::exists(config.path)) {
    return InvalidArgument("model '" + name + "': model file '" + config.path + "' not found");
  }
  const std::shared_ptr<ServedModel> old = registry_->Find(name);
  // A new model gets free CPUs; a new version of a loaded one starts on the old one's (it
  // keeps its share, or has none if the main config defined it).
  bool new_share = false;
  if (options_.allocator != nullptr && old == nullptr) {
    ASSIGN_OR_RETURN(std::vector<int> cpus, ShareFor(config));
    RETURN_IF_ERROR(options_.allocator->SetShare(name, cpus));
    new_share = true;
    PACKRAT_LOG(INFO) << "model repository: '" << name << "' gets CPUs " << FormatCpuList(cpus);
  }
  StatusOr<std::shared_ptr<ServedModel>> made = options_.make_model(config);
  if (!made.ok()) {
    if (new_share) options_.allocator->ReleaseShare(name);
    return made.status();
  }
  std::shared_ptr<ServedModel> model = std::move(made).value();
  if (Status s = model->Load(); !s.ok()) {
    model->Stop(std::chrono::milliseconds(0));
    if (new_share) options_.allocator->ReleaseShare(name);
    return s.code() == StatusCode::kInternal ? Unavailable(s.message()) : s;
  }
  // Traffic switches to the new version; the old one answers what it accepted, then goes.
  if (metrics::ModelMetrics* m = model->metrics(); m && options_.allocator) {
    m->cpus().Set(
        static_cast<double>(options_.allocator->Share(name).value_or(std::vector<int>()).size()));
  }
  registry_->Put(name, model);
  if (options_.on_change) options_.on_change();
  if (old != nullptr) {
    old->Stop(options_.drain);
    PACKRAT_LOG(INFO) << "model repository: '" << name << "' reloaded";
  } else {
    PACKRAT_LOG(INFO) << "model repository: '" << name << "' loaded";
  }
  return Status::Ok();
}

Status ModelRepository::Unload(const std::string& name) {
  if (!ValidName(name)) return InvalidArgument("'" + name + "' is not a model name");
  RETURN_IF_ERROR(Begin(name, /*loading=*/false));
  Status result = Status::Ok();
  if (const std::shared_ptr<ServedModel> model = registry_->Find(name); model == nullptr) {
    result = NotFound("model '" + name + "' is not loaded");
  } else {
    model->set_unloading();
    registry_->BeginTransition(name, "unloading");
    registry_->Remove(name);
    model->Stop(options_.drain);
    registry_->EndTransition(name);
    if (options_.allocator != nullptr) options_.allocator->ReleaseShare(name);
    if (options_.on_change) options_.on_change();
    PACKRAT_LOG(INFO) << "model repository: '" << name << "' unloaded";
  }
  End(name, result);
  // An unloaded model's reason in the index.
  if (result.ok()) {
    MutexLock lock(&mu_);
    entries_[name].reason = "unloaded";
  }
  return result;
}

}  // namespace packrat
