#include "tests/support/config_watch.h"

#include <simdjson.h>

#include <algorithm>

namespace packrat::testing {

std::optional<std::string> AwaitModelConfig(HttpClient& management, const std::string& model,
                                            const std::function<bool(const std::string&)>& done,
                                            std::chrono::seconds timeout, std::string* why) {
  const std::string path = "/v2/models/" + model + "/config";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  HttpResult r = management.Get(path);
  simdjson::dom::parser parser;
  while (true) {
    if (r.status != 200) {
      if (why) *why = "GET " + path + ": " + std::to_string(r.status) + " " + r.body + r.error;
      return std::nullopt;
    }
    if (done(r.body)) return r.body;
    uint64_t revision = 0;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc) != simdjson::SUCCESS ||
        doc["revision"].get(revision) != simdjson::SUCCESS) {
      if (why) *why = "no revision in " + r.body;
      return std::nullopt;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (why) *why = "timed out; the last config: " + r.body;
      return std::nullopt;
    }
    r = management.Get(path + "?wait_after=" + std::to_string(revision) +
                       "&timeout_ms=" + std::to_string(std::min<int64_t>(left.count(), 300'000)));
  }
}

}  // namespace packrat::testing
