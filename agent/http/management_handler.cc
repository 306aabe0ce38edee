#include "agent/http/management_handler.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>

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

// The value of query parameter `name` in `target`, if present.
std::optional<std::string_view> QueryValue(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return std::nullopt;
}

// A non-negative integer query parameter, `fallback` where absent; InvalidArgument otherwise.
StatusOr<uint64_t> QueryInt(std::string_view target, std::string_view name, uint64_t fallback) {
  const std::optional<std::string_view> v = QueryValue(target, name);
  if (!v) return fallback;
  uint64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) {
    return InvalidArgument("query parameter '" + std::string(name) +
                           "' must be a non-negative integer");
  }
  return out;
}

void AppendReason(std::string& out, const Reason& r, const MoveRecord* move = nullptr) {
  out += "{\"rule\":\"" + std::string(RuleName(r.rule)) + "\"";
  if (move) {
    out += ",\"state\":\"" + std::string(MoveStateName(move->state)) + "\"";
    if (!move->error.empty()) {
      out += ",\"error\":";
      AppendJsonString(out, move->error);
    }
  }
  out += ",\"from_batch\":" + std::to_string(r.from_batch);
  out += ",\"to_batch\":" + std::to_string(r.to_batch);
  if (r.estimate > 0) out += ",\"estimate\":" + std::to_string(r.estimate);
  auto number = [&out](const char* key, const std::optional<double>& v) {
    if (v && std::isfinite(*v)) out += ",\"" + std::string(key) + "\":" + std::to_string(*v);
  };
  number("rate", r.rate);
  number("peak_rate", r.peak_rate);
  number("serving_capacity", r.serving_capacity);
  number("target_capacity", r.target_capacity);
  number("serving_p99_ms", r.serving_p99_ms);
  number("target_p99_ms", r.target_p99_ms);
  if (r.backlog_batch > 0) out += ",\"backlog_batch\":" + std::to_string(r.backlog_batch);
  if (r.busy_only) out += ",\"busy_only\":true";
  number("oldest_wait_ms", r.oldest_wait_ms);
  number("behind_wait_ms", r.behind_wait_ms);
  if (r.passed_over) {
    out += ",\"passed_over\":";
    AppendJsonString(out, r.passed_over->ConfigString());
  }
  out += ",\"text\":";
  AppendJsonString(out, r.text);
  out += "}";
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
  out += ",\"revision\":" + std::to_string(s.revision);
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
    out += ",\"capacity\":" + std::to_string(w.capacity);
    if (w.generation > 0) out += ",\"generation\":" + std::to_string(w.generation);
    if (w.started_cold) out += ",\"started_cold\":true";
    // Which isolation it really got: its own cpuset cgroup, or sched_setaffinity only.
    if (w.cgroup.empty()) {
      out += ",\"isolation\":\"affinity\"";
    } else {
      out += ",\"isolation\":\"cgroup\",\"cgroup\":";
      AppendJsonString(out, w.cgroup);
    }
    if (!w.start_priority.empty()) {
      out += ",\"start_priority\":";
      AppendJsonString(out, w.start_priority);
    }
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
  // Why the autoscaler last kept B, and its recent moves (oldest first), with their figures.
  out += ",\"autoscaler\":{";
  if (s.last_hold) {
    out += "\"last_hold\":";
    AppendReason(out, *s.last_hold);
    out += ",";
  }
  out += "\"moves\":[";
  for (size_t i = 0; i < s.moves.size(); ++i) {
    if (i) out += ',';
    AppendReason(out, s.moves[i].reason, &s.moves[i]);
  }
  out += "]}";
  out += ",\"thread_budget\":" + std::to_string(s.thread_budget);
  if (s.plan) out += ",\"predicted_batch_latency_ms\":" + std::to_string(s.plan->latency_ms);
  out += "}";
  return out;
}

void ManagementHandler::Handle(HttpRequest request, HttpResponder respond) {
  if (const Status admitted = gate_.Admit(request.Header("authorization")); !admitted.ok()) {
    HttpResponse r = ErrorFor(admitted);
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"packrat-management\"");
    return respond(std::move(r));
  }
  if (request.target.substr(0, request.target.find('?')) == "/v2/node/partition") {
    if (request.method != "GET") return respond(Json(405, ErrorJson("use GET for the partition")));
    if (!partition_) return respond(Json(404, ErrorJson("the node partition is off")));
    return respond(Json(200, partition_()));
  }
  if (repository_ && RepositoryHandler::Routes(request.target)) {
    return repository_->Handle(std::move(request), std::move(respond));
  }
  const std::string_view name = ConfigRouteModel(request.target);
  if (name.empty()) return kserve_->Handle(std::move(request), std::move(respond));
  // Held by the long poll below; a model unloaded meanwhile answers with its last config.
  const std::shared_ptr<ServedModel> model = models_->Find(name);
  if (model == nullptr) {
    return respond(ErrorFor(models_->Absent(name)));
  }
  if (request.method == "GET") {
    const StatusOr<uint64_t> after = QueryInt(request.target, "wait_after", 0);
    const StatusOr<uint64_t> timeout_ms = QueryInt(request.target, "timeout_ms", 30'000);
    if (!after.ok()) return respond(ErrorFor(after.status()));
    if (!timeout_ms.ok()) return respond(ErrorFor(timeout_ms.status()));
    if (*timeout_ms > 300'000) {
      return respond(ErrorFor(InvalidArgument("timeout_ms must be at most 300000")));
    }
    if (!QueryValue(request.target, "wait_after") || model->revision() > *after) {
      return respond(Json(200, ModelConfigJson(*model)));
    }
    // A long poll: answered on the watch's thread once something changed, or at the timeout.
    watch_->Add([model] { return model->revision(); }, *after,
                std::chrono::steady_clock::now() + std::chrono::milliseconds(*timeout_ms),
                [model, respond] { respond(Json(200, ModelConfigJson(*model))); });
    return;
  }
  if (request.method != "PUT") {
    return respond(Json(405, ErrorJson("use GET or PUT for a model's config")));
  }
  StatusOr<PlanChange> change = ParsePlanChange(*request.body);
  if (!change.ok()) return respond(ErrorFor(change.status()));
  // `done` runs on the model's control thread, which Stop() joins before the model can go:
  // a raw pointer is enough there (and a shared one could make that thread destroy its owner).
  model->ChangePlan(std::move(change).value(), [raw = model.get(), respond](Status s) {
    respond(s.ok() ? Json(200, ModelConfigJson(*raw)) : ErrorFor(s));
  });
}

}  // namespace packrat
