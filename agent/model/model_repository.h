// ModelRepository: models that come and go at run time (issue "model repository"), Triton's
// repository API over `server.model_repository` — one folder per model, DIR/NAME/model.yaml.
//
//   Load(NAME)    reads DIR/NAME again, gives the model a share of the node's CPUs (those no
//                 other model holds; ResourceAllocator's shares), starts and warms its runtimes
//                 (profiling first if `instances: auto` has no stored profile), then publishes
//                 it in the ModelRegistry. A model already loaded is replaced without downtime:
//                 the new version starts on the old one's CPUs beside it, the registry switches
//                 to it, and only then does the old one drain.
//   Unload(NAME)  marks it unloading (new requests: "not ready: being unloaded"), takes it out
//                 of the registry, answers what it had accepted (drain), stops its runtimes,
//                 frees its CPUs; its metrics series go once the last request holding it is done.
//   Index()       every folder found and every model loaded, with Triton's states.
//
// The main config's models are in the registry from the start; the repository lists them,
// can unload them, and reloads them only from a folder of the same name.
//
// Failures (no folder, no model.yaml, a YAML error with file:line, a missing model file, too
// few free CPUs, runtimes that do not start) are the load's answer and the folder's reason in
// the index; the rest of the node keeps serving, and a failed reload leaves the old version
// serving.
//
// Thread-safety: as RepositoryControl (loads and unloads of one model are serialised; of
// different models run in parallel). Shutdown() refuses new work and waits for work in flight.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/model/model_registry.h"
#include "agent/model/repository_control.h"
#include "agent/pool/resource_allocator.h"
#include "common/mutex.h"

namespace packrat {

class ServedModel;

struct ModelRepositoryOptions {
  std::string dir;       // server.model_repository; empty: main-config models only
  bool load_all = true;  // server.model_control: all
  // Makes the ServedModel for `config` (not loaded yet), or says why it cannot (the load
  // answers that). Required.
  std::function<StatusOr<std::shared_ptr<ServedModel>>(const ModelConfig& config)> make_model;
  ResourceAllocator* allocator = nullptr;  // not owned; null: no CPU shares (tests)
  // How long an unload or a replaced version may drain its requests.
  std::chrono::milliseconds drain{std::chrono::seconds(30)};
  // Frees `cpus` CPUs for model `name` by shrinking the node partition's models
  // (NodeController::MakeRoom); empty: no partition. Blocking.
  std::function<Status(const std::string& name, int cpus)> make_room;
  // After every load and unload (the node partition decides again). Must not block.
  std::function<void()> on_change;
};

class ModelRepository : public RepositoryControl {
 public:
  // `registry` is not owned and must outlive the repository.
  ModelRepository(ModelRegistry* registry, ModelRepositoryOptions options);
  ~ModelRepository() override;  // Shutdown()s

  // With `load_all`, marks every model folder that LoadAll() will load as loading in the
  // registry (ModelRegistry::BeginTransition): before the listeners start, so that no front end
  // calls one unknown meanwhile.
  void ExpectAll();
  // With `load_all`, loads every model folder (blocking; for the agent's loader thread at
  // start). Failures are logged, kept in the index and in the registry as failed at start
  // (ModelRegistry::FailedAtStart).
  struct StartLoad {
    int tried = 0;
    int loaded = 0;
    Status first_failure;  // "model 'm': ..." for the first folder that did not load
  };
  StartLoad LoadAll();

  std::vector<RepositoryModel> Index(bool ready_only) override;
  Status Load(const std::string& name) override;
  Status Unload(const std::string& name) override;

  // Refuses new loads and unloads (Unavailable) and waits for those in progress.
  void Shutdown();

 private:
  // What the repository remembers of a name besides the registry.
  struct Entry {
    bool busy = false;     // a load or unload runs
    bool loading = false;  // ...and it is a first load (the index says LOADING)
    std::string reason;    // the last failure; "" after a success
  };

  // Waits until no other load/unload of `name` runs and marks it busy; Unavailable after
  // Shutdown().
  Status Begin(const std::string& name, bool loading) EXCLUDES(mu_);
  void End(const std::string& name, const Status& result) EXCLUDES(mu_);
  Status DoLoad(const std::string& name);
  // The CPUs a new model `config` gets: its share of the free CPUs (making room for an
  // `instances: auto` model's floor where a node partition can).
  StatusOr<std::vector<int>> ShareFor(const ModelConfig& config) const;
  // Folder names under dir (sorted); {} without a repository.
  std::vector<std::string> Folders() const;

  ModelRegistry* const registry_;
  const ModelRepositoryOptions options_;
  Mutex mu_;
  CondVar changed_;  // an entry stopped being busy
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  int in_flight_ GUARDED_BY(mu_) = 0;
  bool shut_down_ GUARDED_BY(mu_) = false;
};

}  // namespace packrat
