// RepositoryControl: the model repository's operations as the front ends call them — REST's
// /v2/repository/... on the management address and gRPC's RepositoryIndex/Load/Unload. The
// implementation (ModelRepository) reads `server.model_repository`; a node without one has a
// repository of the models in its main config only, which cannot be loaded or unloaded.
//
// Thread-safety: every method may be called from any thread. Load() and Unload() block for as
// long as the work takes (seconds to minutes: runtimes start, warm up, maybe profile; or drain):
// call them from a thread that may wait, never from an I/O thread. Concurrent calls for one
// model are serialised; for different models they run in parallel.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace packrat {

struct RepositoryModel {
  std::string name;
  std::string version;  // "" where none is known (a folder that was never loaded)
  std::string state;    // "READY", "UNAVAILABLE", "LOADING" or "UNLOADING" (Triton's names)
  std::string reason;   // why it is not READY; "" when it is
};

class RepositoryControl {
 public:
  virtual ~RepositoryControl() = default;

  // Every model found in the repository folder or loaded, by name; only READY ones if
  // `ready_only`.
  virtual std::vector<RepositoryModel> Index(bool ready_only) = 0;
  // Reads the model's folder again and loads it; one already loaded is replaced without
  // downtime. NotFound (no such folder), InvalidArgument (model.yaml or the model file is
  // broken), ResourceExhausted (not enough free CPUs; REST 429), Unavailable (runtimes failed to start).
  virtual Status Load(const std::string& name) = 0;
  // Stops admitting requests for `name`, answers those already accepted, stops its runtimes and
  // frees its CPUs, shared memory and metrics. NotFound if it is not loaded.
  virtual Status Unload(const std::string& name) = 0;
};

}  // namespace packrat
