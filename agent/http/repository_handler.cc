#include "agent/http/repository_handler.h"

#include <simdjson.h>

#include "agent/http/kserve_handler.h"
#include "agent/kserve/kserve_codec.h"

namespace packrat {
namespace {

constexpr std::string_view kIndex = "/v2/repository/index";
constexpr std::string_view kModels = "/v2/repository/models/";

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorFor(const Status& s) {
  return Json(HttpStatusFor(s.code()), ErrorJson(s.message()));
}

std::string_view Path(std::string_view target) { return target.substr(0, target.find('?')); }

// {"ready": bool} or an empty body; InvalidArgument otherwise.
StatusOr<bool> ReadyOnly(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS || !root.is_object()) {
    return InvalidArgument("the index request body must be a JSON object");
  }
  simdjson::dom::element ready;
  if (root["ready"].get(ready) != simdjson::SUCCESS) return false;
  bool value = false;
  if (ready.get_bool().get(value) != simdjson::SUCCESS) {
    return InvalidArgument("'ready' must be true or false");
  }
  return value;
}

}  // namespace

std::string RepositoryIndexJson(const std::vector<RepositoryModel>& models) {
  std::string out = "[";
  for (const RepositoryModel& m : models) {
    if (out.size() > 1) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, m.name);
    if (!m.version.empty()) {
      out += ",\"version\":";
      AppendJsonString(out, m.version);
    }
    out += ",\"state\":";
    AppendJsonString(out, m.state);
    if (!m.reason.empty()) {
      out += ",\"reason\":";
      AppendJsonString(out, m.reason);
    }
    out += '}';
  }
  return out + "]";
}

bool RepositoryHandler::Routes(std::string_view target) {
  const std::string_view path = Path(target);
  return path == kIndex || path.substr(0, kModels.size()) == kModels;
}

void RepositoryHandler::Handle(HttpRequest request, HttpResponder respond) {
  const std::string_view path = Path(request.target);
  if (request.method != "POST") {
    return respond(Json(405, ErrorJson("use POST for the model repository")));
  }
  if (repository_ == nullptr) {
    return respond(Json(404, ErrorJson("no model repository")));
  }
  if (path == kIndex) {
    StatusOr<bool> ready_only = ReadyOnly(*request.body);
    if (!ready_only.ok()) return respond(ErrorFor(ready_only.status()));
    return respond(Json(200, RepositoryIndexJson(repository_->Index(*ready_only))));
  }
  // /v2/repository/models/{m}/load | unload
  const std::string_view rest = path.substr(kModels.size());
  const size_t slash = rest.find('/');
  const std::string_view action =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (slash == 0 || (action != "load" && action != "unload")) {
    return respond(Json(404, ErrorJson("no route for " + request.target)));
  }
  const std::string name(rest.substr(0, slash));
  const bool load = action == "load";
  calls_.Run([repository = repository_, name, load, respond = std::move(respond)] {
    const Status s = load ? repository->Load(name) : repository->Unload(name);
    respond(s.ok() ? Json(200, "{}") : ErrorFor(s));
  });
}

}  // namespace packrat
