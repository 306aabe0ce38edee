// ModelRegistry: the node's served models by name, as the front ends (REST, gRPC, management)
// see them. Models come and go at run time (the model repository loads, reloads and unloads
// them), so lookups hand out shared ownership: a request that found a model keeps the object
// alive for as long as it holds the pointer, even if the model is unloaded meanwhile — it then
// answers "not ready" rather than touching freed memory.
//
// Lifetime contract with the model repository: a model leaves the registry before it is
// Stop()ped (so no new request finds it), and is destroyed wherever its last holder lets go;
// ServedModel's destructor after Stop() only frees memory.
//
// Thread-safety: every method may be called from any thread; each holds the registry's lock for
// a map operation only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace packrat {

class ServedModel;

class ModelRegistry {
 public:
  // The model called `name`, or null.
  std::shared_ptr<ServedModel> Find(std::string_view name) const EXCLUDES(mu_);
  // Every model, by name.
  std::vector<std::shared_ptr<ServedModel>> List() const EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

  // Adds `model` under `name`, replacing (and returning) the one there, or null.
  std::shared_ptr<ServedModel> Put(const std::string& name, std::shared_ptr<ServedModel> model)
      EXCLUDES(mu_);
  // Removes and returns the model called `name`, or null.
  std::shared_ptr<ServedModel> Remove(std::string_view name) EXCLUDES(mu_);

  // Increases on every Put and Remove (readiness caches, tests).
  uint64_t version() const EXCLUDES(mu_);

  // A model on its way in or out — a first load or an unload in progress (`what`: "loading",
  // "unloading") — is not served but not unknown either: Absent() says so. Cleared by
  // EndTransition() or by a Put of the name.
  void BeginTransition(const std::string& name, std::string what) EXCLUDES(mu_);
  void EndTransition(std::string_view name) EXCLUDES(mu_);
  // A model the node was asked to load at start that failed (`reason`): the server is not
  // ready while strict (below), until a Put of the name.
  void FailedAtStart(const std::string& name, std::string reason) EXCLUDES(mu_);
  // Why `name` is not served: Unavailable ("model 'm' is loading", "... failed to load at
  // start: ...") for a model in transition or failed at start, else NotFound ("unknown model").
  Status Absent(std::string_view name) const EXCLUDES(mu_);

  // Server readiness (KServe's /v2/health/ready, gRPC ServerReady). Never while start-up still
  // loads the models the config and the repository ask for (set_starting). Then, strict (the
  // default, as Triton's strict readiness): every model served is ready and none asked for at
  // start failed; lenient: ready, whatever the models' states (each model's own readiness
  // still says).
  bool Ready() const EXCLUDES(mu_);
  void set_starting(bool starting) EXCLUDES(mu_);
  void set_strict_readiness(bool strict) EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ServedModel>, std::less<>> models_ GUARDED_BY(mu_);
  uint64_t version_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string, std::less<>> transitions_ GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> failed_at_start_ GUARDED_BY(mu_);
  bool starting_ GUARDED_BY(mu_) = false;
  bool strict_ GUARDED_BY(mu_) = true;
};

}  // namespace packrat
