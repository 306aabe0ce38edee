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

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ServedModel>, std::less<>> models_ GUARDED_BY(mu_);
  uint64_t version_ GUARDED_BY(mu_) = 0;
};

}  // namespace packrat
