// The HTTP surface the handlers see: plain structs, so that only http_server.cc includes Beast.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace packrat {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // path and query, as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::shared_ptr<const std::string> body;                   // never null

  // The value of header `name` (lower-case), if present.
  std::optional<std::string_view> Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return std::string_view(v);
    }
    return std::nullopt;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// Sends the response for one request. Call exactly once, from any thread; never blocks.
using HttpResponder = std::function<void(HttpResponse)>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Handles one request on an I/O thread. Must not block: long work answers through
  // `respond` later, from another thread.
  virtual void Handle(HttpRequest request, HttpResponder respond) = 0;
};

}  // namespace packrat
