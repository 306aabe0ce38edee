// The model repository's REST routes (Triton's repository extension), on the management
// address and under its token:
//   POST /v2/repository/index                   body optional {"ready": true}
//        -> 200 [{"name","version","state":"READY|UNAVAILABLE|LOADING|UNLOADING","reason"}]
//   POST /v2/repository/models/{m}/load          -> 200 {} once it serves (or replaced the
//                                                   loaded version); an error JSON otherwise
//   POST /v2/repository/models/{m}/unload        -> 200 {} once drained and stopped
// Loads and unloads run on threads of their own (BlockingCalls): the management I/O thread
// never waits for them. Request bodies of load/unload (Triton's `parameters`) are ignored.
#pragma once

#include <string_view>

#include "agent/http/http_types.h"
#include "agent/model/repository_control.h"
#include "common/blocking_calls.h"

namespace packrat {

class RepositoryHandler {
 public:
  // `repository` is not owned; null: every route answers 404 "no model repository".
  explicit RepositoryHandler(RepositoryControl* repository) : repository_(repository) {}

  // Whether `target` is one of the routes above (then Handle() answers it).
  static bool Routes(std::string_view target);
  void Handle(HttpRequest request, HttpResponder respond);
  // Waits for loads and unloads in progress (shutdown).
  void Join() { calls_.Join(); }

 private:
  RepositoryControl* const repository_;
  BlockingCalls calls_;
};

// The index as JSON (exposed for tests).
std::string RepositoryIndexJson(const std::vector<RepositoryModel>& models);

}  // namespace packrat
