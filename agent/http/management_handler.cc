#include "agent/http/management_handler.h"

#include <simdjson.h>

#include <cstdint>

#include "agent/kserve/kserve_codec.h"
#include "agent/pool/cpu_list.h"

namespace packrat {
namespace {

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorFor(const Status& s) {
  return Json(HttpStatusFor(s.code()), ErrorJson(s.message()));
}

// "/v2/models/{m}/config" -> m; empty otherwise.
std::string_view ConfigRouteModel(std::string_view target) {
  target = target.substr(0, target.find('?'));
  constexpr std::string_view kPrefix = "/v2/models/";
  constexpr std::string_view kSuffix = "/config";
  if (target.size() <= kPrefix.size() + kSuffix.size() ||
      target.substr(0, kPrefix.size()) != kPrefix ||
      target.substr(target.size() - kSuffix.size()) != kSuffix) {
    return {};
  }
  const std::string_view name =
      target.substr(kPrefix.size(), target.size() - kPrefix.size() - kSuffix.size());
  return name.find('/') == std::string_view::npos ? name : std::string_view();
}

StatusOr<int64_t> PositiveInt(simdjson::dom::element e, const std::string& field) {
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS) {
    uint64_t u = 0;
    if (e.get_uint64().get(u) != simdjson::SUCCESS || u > uint64_t{INT32_MAX}) {
      return InvalidArgument("'" + field + "' must be an integer");
    }
    v = static_cast<int64_t>(u);
  }
  if (v < 1) return InvalidArgument("'" + field + "' must be >= 1");
  if (v > INT32_MAX) return InvalidArgument("'" + field + "' is out of range");
  return v;
}

}  // namespace

StatusOr<PlanChange> ParsePlanChange(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) {
    return InvalidArgument("the body is not valid JSON");
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return InvalidArgument("the body must be a JSON object");
  }
  PlanChange change;
  for (auto [key, value] : object) {
    if (key == "instances") {
      simdjson::dom::array groups;
      if (value.get_array().get(groups) != simdjson::SUCCESS || groups.size() == 0) {
        return InvalidArgument("'instances' must be a non-empty array of {count,threads,batch}");
      }
      std::vector<InstanceGroup> plan;
      size_t i = 0;
      for (simdjson::dom::element g : groups) {
        const std::string at = "instances[" + std::to_string(i++) + "]";
        simdjson::dom::object fields;
        if (g.get_object().get(fields) != simdjson::SUCCESS) {
          return InvalidArgument("'" + at + "' must be an object");
        }
        InstanceGroup group;
        int seen = 0;
        for (auto [name, v] : fields) {
          int* target = name == "count"     ? &group.count
                        : name == "threads" ? &group.threads
                        : name == "batch"   ? &group.batch
                                            : nullptr;
          if (target == nullptr) {
            return InvalidArgument("'" + at + "." + std::string(name) + "' is not a known field");
          }
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(v, at + "." + std::string(name)));
          *target = static_cast<int>(n);
          ++seen;
        }
        if (seen != 3) return InvalidArgument("'" + at + "' needs count, threads and batch");
        plan.push_back(group);
      }
      change.instances = std::move(plan);
    } else if (key == "batch") {
      ASSIGN_OR_RETURN(int64_t b, PositiveInt(value, "batch"));
      change.batch = b;
    } else if (key == "adaptive") {
      bool adaptive = false;
      if (value.get_bool().get(adaptive) != simdjson::SUCCESS) {
        return InvalidArgument("'adaptive' must be true or false");
      }
      change.adaptive = adaptive;
    } else {
      return InvalidArgument("unknown field '" + std::string(key) +
                             "' (expected instances, batch or adaptive)");
    }
  }
  if (!change.instances && !change.batch && !change.adaptive) {
    return InvalidArgument("give 'instances', 'batch' or 'adaptive'");
  }
  return change;
}

std::string ModelConfigJson(const ServedModel& model) {
  const ServingSnapshot s = model.Snapshot();
  std::string out = "{\"model\":";
  AppendJsonString(out, model.name());
  out += ",\"generation\":" + std::to_string(s.generation);
  out += ",\"batch\":" + std::to_string(s.batch);
  out += ",\"backlog_batch\":" + std::to_string(s.backlog_batch);
  out += ",\"instances\":[";
  for (size_t i = 0; i < s.groups.size(); ++i) {
    if (i) out += ',';
    out += "{\"count\":" + std::to_string(s.groups[i].count) +
           ",\"threads\":" + std::to_string(s.groups[i].threads) +
           ",\"batch\":" + std::to_string(s.groups[i].batch) + "}";
  }
  // One runtime: its process, CPUs and shape; `generation` 0 for a parked one (in no set).
  auto append_worker = [&out](const WorkerInfo& w, const char* state) {
    out += "{\"pid\":" + std::to_string(w.pid) + ",\"cpus\":";
    AppendJsonString(out, FormatCpuList(w.cpus));
    out += ",\"threads\":" + std::to_string(w.threads) + ",\"batch\":" + std::to_string(w.batch);
    if (w.generation > 0) out += ",\"generation\":" + std::to_string(w.generation);
    out += ",\"state\":\"" + std::string(state) + "\"}";
  };
  out += "],\"workers\":[";
  for (size_t i = 0; i < s.workers.size(); ++i) {
    const WorkerInfo& w = s.workers[i];
    if (i) out += ',';
    append_worker(w, !w.alive ? "dead" : w.draining ? "draining" : "active");
  }
  // Idle runtimes of earlier sets that a later move may take (reconfiguration.parked_runtimes).
  out += "],\"parked\":[";
  for (size_t i = 0; i < s.parked.size(); ++i) {
    if (i) out += ',';
    append_worker(s.parked[i], s.parked[i].alive ? "parked" : "dead");
  }
  out += "],\"estimator\":{\"ewma\":" + std::to_string(s.ewma) +
         ",\"estimate\":" + std::to_string(s.estimate) +
         ",\"adaptive\":" + (s.adaptive ? "true" : "false") + "}";
  out += ",\"thread_budget\":" + std::to_string(s.thread_budget);
  if (s.plan) out += ",\"predicted_batch_latency_ms\":" + std::to_string(s.plan->latency_ms);
  out += "}";
  return out;
}

void ManagementHandler::Handle(HttpRequest request, HttpResponder respond) {
  const std::string_view name = ConfigRouteModel(request.target);
  if (name.empty()) return kserve_->Handle(std::move(request), std::move(respond));
  const auto it = models_->find(name);
  if (it == models_->end()) {
    return respond(Json(404, ErrorJson("unknown model '" + std::string(name) + "'")));
  }
  ServedModel* model = it->second.get();
  if (request.method == "GET") return respond(Json(200, ModelConfigJson(*model)));
  if (request.method != "PUT") {
    return respond(Json(405, ErrorJson("use GET or PUT for a model's config")));
  }
  StatusOr<PlanChange> change = ParsePlanChange(*request.body);
  if (!change.ok()) return respond(ErrorFor(change.status()));
  model->ChangePlan(std::move(change).value(), [model, respond](Status s) {
    respond(s.ok() ? Json(200, ModelConfigJson(*model)) : ErrorFor(s));
  });
}

}  // namespace packrat
