#include "agent/http/kserve_handler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "agent/config/triton_model_config.h"
#include "agent/http/generation.h"
#include "agent/kserve/generate_codec.h"
#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/log_settings.h"
#include "agent/kserve/shared_memory_json.h"
#include "agent/kserve/statistics_json.h"
#include "common/load_report.h"
#include "common/logging.h"

namespace packrat {
namespace {

constexpr char kServerName[] = "packrat";
constexpr char kServerVersion[] = "0.1.0";

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse Error(int status, std::string_view message) {
  return Json(status, ErrorJson(message));
}

HttpResponse ErrorFor(const Status& s) {
  HttpResponse r = Error(HttpStatusFor(s.code()), s.message());
  if (s.code() == StatusCode::kResourceExhausted) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// Health answers carry no body: 200 means true, 400 false (protocol: "4xx indicates false").
HttpResponse Health(bool ok) {
  HttpResponse r;
  r.status = ok ? 200 : 400;
  r.content_type = "text/plain";
  return r;
}

std::vector<std::string_view> SplitPath(std::string_view target) {
  const size_t q = target.find('?');
  if (q != std::string_view::npos) target = target.substr(0, q);
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos < target.size()) {
    if (target[pos] == '/') {
      ++pos;
      continue;
    }
    const size_t next = target.find('/', pos);
    parts.push_back(target.substr(pos, next == std::string_view::npos ? next : next - pos));
    if (next == std::string_view::npos) break;
    pos = next;
  }
  return parts;
}

// `in` with its %XX escapes decoded into `out`; false for a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int high = hex(in[i + 1]);
    const int low = hex(in[i + 2]);
    if (high < 0 || low < 0) return false;
    out->push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return true;
}

void AppendTensorSpecs(std::string& out, const std::vector<TensorSpec>& specs) {
  out += '[';
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, specs[i].name);
    out += ",\"datatype\":";
    AppendJsonString(out, DataTypeName(specs[i].datatype));
    out += ",\"shape\":" + ShapeToString(specs[i].shape) + "}";
  }
  out += ']';
}

std::string ModelMetadata(const ServedModel& model) {
  const ModelSignature& sig = model.signature();
  std::string out = "{\"name\":";
  AppendJsonString(out, sig.name);
  out += ",\"versions\":[";
  AppendJsonString(out, sig.version);
  out += "],\"platform\":";
  AppendJsonString(out, sig.platform);
  out += ",\"inputs\":";
  AppendTensorSpecs(out, sig.inputs);
  out += ",\"outputs\":";
  AppendTensorSpecs(out, sig.outputs);
  out += ",\"parameters\":{\"state\":";
  AppendJsonString(out, ModelStateName(model.state()));
  if (const std::string detail = model.status_detail(); !detail.empty()) {
    out += ",\"state_detail\":";
    AppendJsonString(out, detail);
  }
  out += ",\"max_batch\":" + std::to_string(sig.max_batch);
  out += ",\"target_batch\":" + std::to_string(model.config().TargetBatch());
  out += ",\"instances\":";
  if (model.config().auto_instances && model.groups().empty()) {
    out += "\"auto\"";
  } else {
    out += '[';
    const std::vector<InstanceGroup> groups = model.groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i) out += ',';
      out += "{\"count\":" + std::to_string(groups[i].count) +
             ",\"threads\":" + std::to_string(groups[i].threads) +
             ",\"batch\":" + std::to_string(groups[i].batch) + "}";
    }
    out += ']';
  }
  if (const std::optional<Plan> plan = model.optimizer_plan()) {
    out += ",\"predicted_batch_latency_ms\":" + std::to_string(plan->latency_ms);
    if (plan->fat_latency_ms) {
      out += ",\"fat_batch_latency_ms\":" + std::to_string(*plan->fat_latency_ms);
    }
  }
  // The kernel settings asked for, and what the runtime reported at load (settings in effect,
  // the accuracy guard's figures): {"kernel":"bf16+cl","checked":1,"max_rel_error":0.004,...}.
  out += ",\"kernel\":";
  AppendJsonString(out, model.config().kernel.Key());
  if (const LoadReport report = LoadReport::Parse(model.load_report()); !report.empty()) {
    out += ",\"load_report\":{";
    bool first = true;
    for (const auto& [key, value] : report.items()) {
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, key);
      out += ':';
      char* num_end = nullptr;
      const double number = std::strtod(value.c_str(), &num_end);
      if (!value.empty() && *num_end == '\0' && std::isfinite(number)) {
        out += value;
      } else {
        AppendJsonString(out, value);
      }
    }
    out += '}';
  }
  // Layered batching: the budget and what the stage profile derived from it, per thread count.
  if (const std::vector<LayeredInfo> layered = model.layered_info(); !layered.empty()) {
    out += ",\"layered\":[";
    for (size_t i = 0; i < layered.size(); ++i) {
      const LayeredInfo& l = layered[i];
      if (i) out += ',';
      out += "{\"threads\":" + std::to_string(l.threads) +
             ",\"stages\":" + std::to_string(l.stages) +
             ",\"profiled_batch\":" + std::to_string(l.profiled_batch) +
             ",\"latency_budget_ms\":" + std::to_string(l.budget_ms) +
             ",\"strict_budget_ms\":" + std::to_string(l.strict_budget_ms) +
             ",\"max_fluctuation\":" + std::to_string(l.max_fluctuation) +
             ",\"optimal_batch\":" + std::to_string(l.optimal_batch) +
             ",\"per_sample_fit\":{\"z1\":" + std::to_string(l.fit.z1) +
             ",\"z2\":" + std::to_string(l.fit.z2) + ",\"z3\":" + std::to_string(l.fit.z3) +
             ",\"z4\":" + std::to_string(l.fit.z4) +
             ",\"rms_rel_error\":" + std::to_string(l.fit.rms_rel_error) + "}}";
    }
    out += ']';
  }
  const std::string failure = model.failure();
  if (!failure.empty()) {
    out += ",\"reason\":";
    AppendJsonString(out, failure);
  }
  out += "}}";
  return out;
}

// A model that does not take requests now: 404 once it is being unloaded (it will not come
// back; the client should stop asking), 503 while it loads or failed.
HttpResponse NotReady(const ServedModel& model) {
  if (model.unloading()) {
    return Error(404, "model '" + model.name() + "' is not ready: it is being unloaded");
  }
  return Error(503, "model '" + model.name() + "' is not ready");
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kOutOfRange:
      return 413;
    case StatusCode::kFailedPrecondition:
      return 503;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kCancelled:
      return 499;  // the client went away (nginx's and Envoy's code): not a server error
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kAborted:
      return 409;
  }
  return 500;
}

bool KserveHandler::AllReady() const {
  return !shutting_down_.load(std::memory_order_acquire) && models_->Ready();
}

namespace {

// A model's statistics (zero where it has no metrics).
NamedStatistics StatisticsOf(const ServedModel& model) {
  NamedStatistics out{model.name(), model.signature().version, {}};
  if (metrics::ModelMetrics* m = model.metrics()) out.figures = m->statistics().Read();
  return out;
}

}  // namespace

void KserveHandler::Handle(HttpRequest request, HttpResponder respond) {
  const std::vector<std::string_view> p = SplitPath(request.target);
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  if (p.empty() || p[0] != "v2") return respond(Error(404, "no route for " + request.target));

  if (p.size() == 1) {
    if (!get) return respond(Error(405, "use GET for server metadata"));
    std::string body =
        "{\"name\":\"" + std::string(kServerName) + "\",\"version\":\"" + kServerVersion +
        "\",\"extensions\":[\"binary_tensor_data\",\"logging\",\"statistics\"" +
        (regions_ != nullptr && regions_->enabled() ? ",\"system_shared_memory\"" : "") + "]}";
    return respond(Json(200, std::move(body)));
  }
  if (p[1] == "health" && p.size() == 3) {
    if (!get) return respond(Error(405, "use GET for health"));
    if (p[2] == "live") return respond(Health(true));
    if (p[2] == "ready") return respond(Health(AllReady()));
    return respond(Error(404, "no route for " + request.target));
  }
  if (p[1] == "systemsharedmemory") return SharedMemory(p, request, std::move(respond));
  if (p[1] == "logging" && p.size() == 2) return Logging(request, std::move(respond));
  if (p[1] != "models" || p.size() < 3) {
    return respond(Error(404, "no route for " + request.target));
  }
  if (p.size() == 3 && p[2] == "stats") {
    if (!get) return respond(Error(405, "use GET for statistics"));
    std::vector<NamedStatistics> all;
    for (const std::shared_ptr<ServedModel>& m : models_->List()) all.push_back(StatisticsOf(*m));
    return respond(Json(200, ModelStatisticsJson(all)));
  }
  const LogScope log_scope(p[2], request.request_id);
  const std::shared_ptr<ServedModel> model = models_->Find(p[2]);
  if (model == nullptr) {
    const Status absent = models_->Absent(p[2]);  // 503 while loading or unloading
    return respond(Error(HttpStatusFor(absent.code()), absent.message()));
  }
  size_t next = 3;
  if (p.size() >= 5 && p[3] == "versions") {
    if (p[4] != model->signature().version) {
      return respond(
          Error(404, "model '" + model->name() + "' has no version '" + std::string(p[4]) + "'"));
    }
    next = 5;
  }
  if (p.size() == next) {
    if (!get) return respond(Error(405, "use GET for model metadata"));
    return respond(Json(200, ModelMetadata(*model)));
  }
  if (p.size() == next + 1 && p[next] == "ready") {
    if (!get) return respond(Error(405, "use GET for model readiness"));
    return respond(Health(model->state() == ModelState::kReady &&
                          !shutting_down_.load(std::memory_order_acquire)));
  }
  if (p.size() == next + 1 && p[next] == "stats") {
    if (!get) return respond(Error(405, "use GET for statistics"));
    return respond(Json(200, ModelStatisticsJson({StatisticsOf(*model)})));
  }
  // Triton's view of the config; the management address answers Packrat's (and takes PUT).
  if (p.size() == next + 1 && p[next] == "config") {
    if (!get) return respond(Error(405, "use GET for the model's configuration"));
    const TritonModelConfig config =
        TritonConfigOf(model->config(), model->signature(), model->groups());
    return respond(Json(200, TritonModelConfigJson(config)));
  }
  if (p.size() == next + 1 && p[next] == "infer") {
    if (!post) return respond(Error(405, "use POST for inference"));
    return Infer(model, std::move(request), std::move(respond));
  }
  if (p.size() == next + 1 && (p[next] == "generate" || p[next] == "generate_stream")) {
    if (!post) return respond(Error(405, "use POST for generation"));
    return Generate(model, std::move(request), std::move(respond), p[next] == "generate_stream");
  }
  return respond(Error(404, "no route for " + request.target));
}

void KserveHandler::Logging(const HttpRequest& request, HttpResponder respond) {
  if (request.method == "GET" || request.method == "HEAD") {
    return respond(Json(200, LogSettingsJson(CurrentLogSettings())));
  }
  if (request.method != "POST") return respond(Error(405, "use GET or POST for log settings"));
  if (const Status admitted = gate_.Admit(request.Header("authorization")); !admitted.ok()) {
    HttpResponse r = ErrorFor(admitted);
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"packrat-management\"");
    return respond(std::move(r));
  }
  StatusOr<LogSettings> change = ParseLogSettingsJson(*request.body);
  if (!change.ok()) return respond(ErrorFor(change.status()));
  if (const Status applied = ApplyLogSettings(*change); !applied.ok()) {
    return respond(ErrorFor(applied));
  }
  PACKRAT_LOG(INFO) << "log settings changed: " << LogSettingsJson(*change);
  return respond(Json(200, LogSettingsJson(CurrentLogSettings())));
}

void KserveHandler::SharedMemory(const std::vector<std::string_view>& p, const HttpRequest& request,
                                 HttpResponder respond) {
  if (regions_ == nullptr || !regions_->enabled()) {
    return respond(Error(404, kSharedMemoryOff));
  }
  // /v2/systemsharedmemory[/region/{r}]/{action}
  const bool named = p.size() == 5 && p[2] == "region";
  if (!named && p.size() != 3) return respond(Error(404, "no route for " + request.target));
  std::string region;
  if (named && !PercentDecode(p[3], &region)) {
    return respond(Error(400, "bad %-escape in region name '" + std::string(p[3]) + "'"));
  }
  const std::string_view action = p.back();
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (action == "status") {
    if (!get) return respond(Error(405, "use GET for shared-memory status"));
    const auto regions = regions_->Regions(region);
    if (!regions.ok()) return respond(ErrorFor(regions.status()));
    return respond(Json(200, SharedMemoryStatusJson(*regions)));
  }
  if (action != "register" && action != "unregister") {
    return respond(Error(404, "no route for " + request.target));
  }
  if (request.method != "POST") return respond(Error(405, "use POST to " + std::string(action)));
  Status done;
  if (action == "unregister") {
    done = regions_->Unregister(region);
  } else if (!named) {
    return respond(
        Error(404, "register needs a region: /v2/systemsharedmemory/region/{r}/register"));
  } else {
    const auto body = ParseSharedMemoryRegisterBody(*request.body);
    done = body.ok() ? regions_->Register(region, body->key, body->offset, body->byte_size)
                     : body.status();
  }
  respond(done.ok() ? Json(200, "{}") : ErrorFor(done));
}

std::shared_ptr<ServedModel> KserveHandler::Successor(
    const std::shared_ptr<ServedModel>& model) const {
  if (model->state() != ModelState::kStopped || model->unloading()) return model;
  std::shared_ptr<ServedModel> next = models_->Find(model->name());
  if (next == nullptr || next == model || !(next->signature() == model->signature())) return model;
  return next;
}

void KserveHandler::Infer(std::shared_ptr<ServedModel> held, HttpRequest request,
                          HttpResponder respond) {
  held = Successor(held);
  ServedModel* model = held.get();
  // Every answer from here on is counted in the model's metrics (unknown model names are not,
  // so clients cannot create series).
  metrics::ModelMetrics* m = model->metrics();
  const SteadyTime received = std::chrono::steady_clock::now();
  if (m != nullptr) m->inflight().Increment();
  HttpResponder finish = [m, received, name = model->name(),
                          respond = std::move(respond)](HttpResponse r) {
    r.access.model = name;
    if (m != nullptr) m->Answered(r.status, received);
    respond(std::move(r));
  };

  if (model->generative()) {
    return finish(Error(400, "model '" + model->name() + "' is generative: use POST /v2/models/" +
                                 model->name() + "/generate"));
  }
  if (model->state() != ModelState::kReady) return finish(NotReady(*model));
  std::optional<size_t> header_length;
  if (auto h = request.Header("inference-header-content-length")) {
    size_t v = 0;
    const auto [ptr, ec] = std::from_chars(h->data(), h->data() + h->size(), v);
    if (ec != std::errc() || ptr != h->data() + h->size()) {
      return finish(Error(400, "bad Inference-Header-Content-Length '" + std::string(*h) + "'"));
    }
    header_length = v;
  }
  auto decoded =
      DecodeInferRequest(model->signature(), std::move(request.body), header_length, regions_);
  if (!decoded.ok()) return finish(ErrorFor(decoded.status()));

  // `held` keeps the signature alive for the answer even if the model is unloaded meanwhile (the
  // model answers every request it accepted before it goes; the callback never holds the last
  // reference, since whoever unloads it holds one until Stop() has joined its threads).
  auto done = [model = held, finish](const Status& status, InferenceRequest& req) {
    // The access log's share of the request's life: queueing, then batches.
    auto timed = [&req](HttpResponse r) {
      r.access.rows = req.rows();
      if (const std::optional<SteadyTime> dispatched = req.dispatched()) {
        using Ms = std::chrono::duration<double, std::milli>;
        r.access.queue_ms = Ms(*dispatched - req.arrival()).count();
        r.access.compute_ms = Ms(std::chrono::steady_clock::now() - *dispatched).count();
      }
      return r;
    };
    // Leases go before the answer: its client may unregister the regions next.
    if (!status.ok()) {
      req.ReleaseSharedMemory();
      return finish(timed(ErrorFor(status)));
    }
    std::vector<TensorView> outputs;
    outputs.reserve(req.outputs().size());
    for (const Tensor& t : req.outputs()) outputs.push_back(t.View());
    auto encoded = EncodeInferResponse(model->signature(), req.decoded(), outputs);
    req.ReleaseSharedMemory();
    if (!encoded.ok()) return finish(timed(ErrorFor(encoded.status())));
    HttpResponse r;
    r.status = 200;
    r.content_type = std::move(encoded->content_type);
    r.body = std::move(encoded->body);
    if (encoded->header_length) {
      r.headers.emplace_back("Inference-Header-Content-Length",
                             std::to_string(*encoded->header_length));
    }
    finish(timed(std::move(r)));
  };
  // The request's own `parameters.timeout` (µs, as Triton's), else the model's default.
  std::optional<std::chrono::microseconds> timeout;
  if (decoded->timeout_us) {
    timeout = std::chrono::microseconds(*decoded->timeout_us);
  } else if (const int64_t ms = model->config().batching.timeout_ms; ms > 0) {
    timeout = std::chrono::milliseconds(ms);
  }
  auto req =
      std::make_shared<InferenceRequest>(std::move(decoded).value(), std::move(done), received);
  if (timeout) req->set_deadline(received + *timeout);
  Status submitted = model->Submit(req);
  if (submitted.code() == StatusCode::kFailedPrecondition) {
    // A reload switched versions since the lookup: the new version takes the request.
    if (const std::shared_ptr<ServedModel> next = Successor(held); next != held) {
      submitted = next->Submit(req);
    }
  }
  if (!submitted.ok()) {
    finish(submitted.code() == StatusCode::kFailedPrecondition && model->unloading()
               ? NotReady(*model)
               : ErrorFor(submitted));
    return;
  }
  PACKRAT_LOG(DEBUG) << "queued request '" << req->decoded().id << "' for model '" << model->name()
                     << "': " << req->rows() << " row(s)";
}

void KserveHandler::Generate(const std::shared_ptr<ServedModel>& held, HttpRequest request,
                             HttpResponder respond, bool stream) {
  ServedModel* model = held.get();
  metrics::ModelMetrics* m = model->metrics();
  const SteadyTime received = std::chrono::steady_clock::now();
  if (m != nullptr) m->inflight().Increment();
  // Counts the answer once it is complete (for a stream: when the stream ends).
  auto count = [m, received](int status) {
    if (m != nullptr) m->Answered(status, received);
  };
  // Every answer names the model in the access log.
  respond = [respond = std::move(respond), name = model->name()](HttpResponse r) {
    r.access.model = name;
    respond(std::move(r));
  };
  auto fail = [&](HttpResponse r) {
    count(r.status);
    respond(std::move(r));
  };
  if (!model->generative()) {
    return fail(Error(400, "model '" + model->name() + "' is not generative; use /infer"));
  }
  if (model->state() != ModelState::kReady) return fail(NotReady(*model));
  auto call = DecodeGenerateRequest(*request.body, model->generate_limits());
  if (!call.ok()) return fail(ErrorFor(call.status()));

  auto generation = std::make_shared<Generation>(model->name(), call->stop_ids, received, m);
  auto req = std::make_shared<GenerateRequest>();
  req->prompt = std::move(call->input_ids);
  req->params.max_tokens = static_cast<uint32_t>(call->max_tokens);
  req->params.top_k = static_cast<uint32_t>(call->top_k);
  req->params.temperature = static_cast<float>(call->temperature);
  req->params.seed =
      call->seed != 0 ? call->seed : static_cast<uint64_t>(received.time_since_epoch().count());
  req->params.num_stop_ids = static_cast<uint32_t>(call->stop_ids.size());
  for (size_t i = 0; i < call->stop_ids.size(); ++i) {
    req->params.stop_ids[i] = static_cast<int32_t>(call->stop_ids[i]);
  }
  req->on_token = [generation, stream](int32_t token, float prob, bool last) {
    generation->Token(token, prob, last, stream);
  };
  if (stream) {
    req->on_done = [generation, count](const Status& s) {
      generation->EndStream(s);
      count(200);
    };
  } else {
    req->on_done = [generation, count, respond](const Status& s) {
      if (!s.ok()) {
        HttpResponse r = ErrorFor(s);
        count(r.status);
        return respond(std::move(r));
      }
      count(200);
      respond(Json(200, generation->Response()));
    };
  }
  std::function<void()> cancel;
  if (Status s = model->Generate(req, &cancel); !s.ok()) return fail(ErrorFor(s));
  generation->SetCancel(std::move(cancel));
  // A client that goes away cancels its sequence, which frees its decode slot.
  if (request.on_disconnect) request.on_disconnect([generation] { generation->Cancel(); });
  if (stream) {
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.stream = [generation](std::shared_ptr<HttpStream> writer) {
      generation->Attach(std::move(writer));
    };
    respond(std::move(r));
  }
}

}  // namespace packrat
