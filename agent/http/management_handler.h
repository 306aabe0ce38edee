// The management address's routes: everything KserveHandler serves, plus
//   GET /v2/models/{m}/config  -> {"revision":R,"generation":N,"batch":B,
//                                  "instances":[{count,threads,batch}],
//                                  "workers":[{"pid","cpus","threads","batch","generation",
//                                  "state":"active|draining|dead","started_cold",
//                                  "isolation":"cgroup|affinity","cgroup":DIR}],
//                                  "parked":[...], "estimator":{"ewma","estimate","adaptive"},
//                                  "autoscaler":{"last_hold":{reason},"moves":[{reason}...]},
//                                  "thread_budget":T, "predicted_batch_latency_ms":…}
//       ?wait_after=R[&timeout_ms=T]: a long poll, answered once the revision exceeds R or
//       after T ms (default 30000, at most 300000) (ConfigWatch)
//   GET /v2/node/partition: the node's CPUs among its models (node_controller.h)
//   POST /v2/repository/index | /v2/repository/models/{m}/load | .../unload: the model
//       repository (repository_handler.h)
// Every route passes the agent's ControlGate (control_gate.h): with a token
// (server.management_token_file) it needs `Authorization: Bearer <token>`; without it: 401
// {"error": ...} and `WWW-Authenticate: Bearer`.
//   PUT /v2/models/{m}/config  with {"instances":[{count,threads,batch},…]} (an explicit plan),
//                              {"batch":B} (the optimizer's plan for B) and/or
//                              {"adaptive":true|false}
//       -> 200 with the new config once the new instance set serves; 400 with a JSON error for a
//          malformed body or an infeasible plan; 503 if the new set could not start (the old one
//          keeps serving) or the model is not ready.
// Reconfigurations run on the model's control thread; the I/O thread never waits for them.
#pragma once

#include "agent/http/config_watch.h"
#include "agent/http/control_gate.h"
#include "agent/http/kserve_handler.h"
#include "agent/http/repository_handler.h"

namespace packrat {

class ManagementHandler : public HttpHandler {
 public:
  // `models`, `kserve` and `watch` are not owned and must outlive the handler.
  ManagementHandler(const ModelRegistry* models, KserveHandler* kserve, ConfigWatch* watch)
      : models_(models), kserve_(kserve), watch_(watch) {}

  void Handle(HttpRequest request, HttpResponder respond) override;

  // Every request passes `gate` from now on (open until then). Call before the server starts.
  void set_gate(ControlGate gate) { gate_ = std::move(gate); }
  // Serves /v2/repository/... (RepositoryHandler) from `repository` (not owned; must outlive
  // the handler). Call before the server starts.
  void set_repository(RepositoryControl* repository) {
    repository_ = std::make_unique<RepositoryHandler>(repository);
  }
  // Serves GET /v2/node/partition with what `json` returns (NodeController::Json). Call
  // before the server starts; without it the route answers 404.
  void set_node_partition(std::function<std::string()> json) { partition_ = std::move(json); }
  // Waits for repository loads and unloads in progress (shutdown).
  void JoinRepositoryCalls() {
    if (repository_) repository_->Join();
  }

 private:
  const ModelRegistry* models_;
  KserveHandler* kserve_;
  ConfigWatch* watch_;
  ControlGate gate_;
  std::unique_ptr<RepositoryHandler> repository_;
  std::function<std::string()> partition_;
};

// The GET body for `model` (exposed for tests).
std::string ModelConfigJson(const ServedModel& model);
// Parses a PUT body. InvalidArgument naming the offending field.
StatusOr<PlanChange> ParsePlanChange(std::string_view body);

}  // namespace packrat
