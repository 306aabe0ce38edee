// KServe v2 / Open Inference Protocol REST routes over the agent's models:
//   GET  /v2/health/live | /v2/health/ready | /v2
//   GET  /v2/models/{m}[/versions/{v}] | .../ready
//   POST /v2/models/{m}[/versions/{v}]/infer   (JSON and binary tensor extension)
//   POST /v2/models/{m}[/versions/{v}]/generate | /generate_stream   (generative models; token
//        ids in and out, see agent/kserve/generate_codec.h; the stream is server-sent events)
//   GET  /v2/systemsharedmemory[/region/{r}]/status, POST .../region/{r}/register,
//   POST /v2/systemsharedmemory[/region/{r}]/unregister   (system shared-memory extension:
//        agent/kserve/shared_memory_json.h; with set_shared_memory; `r` may be %-encoded)
//   GET  /v2/models/stats, /v2/models/{m}[/versions/{v}]/stats   (statistics extension:
//        agent/metrics/inference_statistics.h, agent/kserve/statistics_json.h)
//   GET | POST /v2/logging   (logging extension: agent/kserve/log_settings.h; a POST is a
//        control path, admitted by the control gate)
// Errors are `{"error": "..."}` with the HTTP status of the Status code (HttpStatusFor).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/http/control_gate.h"
#include "agent/http/http_types.h"
#include "agent/kserve/shared_memory_registry.h"
#include "agent/model/model_registry.h"
#include "agent/model/served_model.h"
#include "common/status.h"

namespace packrat {

// 400, 404, 409, 429, 503, 504 or 500.
int HttpStatusFor(StatusCode code);

class KserveHandler : public HttpHandler {
 public:
  // `models` is not owned and must outlive the handler.
  explicit KserveHandler(const ModelRegistry* models) : models_(models) {}

  void Handle(HttpRequest request, HttpResponder respond) override;

  // From now on readiness (server and models) is reported false; inference still works.
  // Called at the start of a graceful shutdown. Thread-safe.
  void SetShuttingDown() { shutting_down_.store(true, std::memory_order_release); }
  // Serves the system shared-memory routes from `regions` (not owned; must outlive the handler),
  // and resolves inference requests' shared-memory references there. Call before the server
  // starts; without it the routes answer 404 and references are refused.
  void set_shared_memory(SharedMemoryRegistry* regions) { regions_ = regions; }
  // The gate of the control paths served here (POST /v2/logging). Call before the server
  // starts; without it they are open.
  void set_gate(ControlGate gate) { gate_ = std::move(gate); }

 private:
  // `model` is held for the call; callbacks that outlive it use raw pointers, which stay valid
  // because an unloaded model answers every request it accepted before it is destroyed.
  void Infer(std::shared_ptr<ServedModel> model, HttpRequest request, HttpResponder respond);
  // The version that replaced `model` if a reload stopped it (the old one drains and accepts
  // nothing new) and the new one reads the same tensors; else `model`.
  std::shared_ptr<ServedModel> Successor(const std::shared_ptr<ServedModel>& model) const;
  void Generate(const std::shared_ptr<ServedModel>& model, HttpRequest request,
                HttpResponder respond, bool stream);
  bool AllReady() const;
  // `p`: the path's segments, p[1] == "systemsharedmemory".
  void SharedMemory(const std::vector<std::string_view>& p, const HttpRequest& request,
                    HttpResponder respond);
  void Logging(const HttpRequest& request, HttpResponder respond);

  const ModelRegistry* models_;
  SharedMemoryRegistry* regions_ = nullptr;
  ControlGate gate_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace packrat
