// The HTTP request path on arbitrary bytes: Boost.Beast's parser with the server's limits, the
// conversion to HttpRequest that the server does, and the KServe and management routes over a
// model that exists but is not loaded (so every route answers at once). Each request must be
// answered exactly once, with a status the protocol allows.
#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/http/management_handler.h"
#include "agent/model/model_registry.h"

namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

packrat::ModelRegistry* Models() {
  static packrat::ModelRegistry* models = [] {
    auto* m = new packrat::ModelRegistry();
    packrat::ModelConfig config;
    config.name = "m";
    config.path = "/nonexistent.pt";
    config.inputs = {{"x", packrat::DataType::kFp32, {-1, 4}}};
    config.outputs = {{"y", packrat::DataType::kFp32, {-1, 2}}};
    config.batching.max_batch = 8;
    config.instances = {{1, 1, 4}};
    m->Put("m", std::make_shared<packrat::ServedModel>(config, packrat::ServedModelOptions{},
                                                       nullptr));
    return m;
  }();
  return models;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static packrat::KserveHandler kserve(Models());
  static packrat::ConfigWatch watch;
  static packrat::ManagementHandler management(Models(), &kserve, &watch);
  bhttp::request_parser<bhttp::string_body> parser;
  parser.body_limit(1 << 20);
  parser.header_limit(16 << 10);
  parser.eager(true);
  beast::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_done() || used > size) return 0;
  bhttp::request<bhttp::string_body> req = parser.release();
  packrat::HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  for (const auto& field : req) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  request.body = std::make_shared<const std::string>(std::move(req.body()));
  int answers = 0;
  management.Handle(std::move(request), [&answers](packrat::HttpResponse r) {
    ++answers;
    if (r.status < 200 || r.status > 599) __builtin_trap();
    if (r.status >= 400 && r.content_type == "application/json" &&
        r.body.find("\"error\"") == std::string::npos) {
      __builtin_trap();
    }
  });
  if (answers != 1) __builtin_trap();
  return 0;
}
