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
  // The client's X-Request-Id where usable, else one the server generated; the response
  // carries it back (X-Request-Id) and the access log line names it.
  std::string request_id;
  // Registers a callback that runs once, on an I/O thread, if the client closes its connection
  // before this request's response has been sent (long requests use it to stop work nobody
  // waits for). Set by the server; empty where the transport cannot tell.
  std::function<void(std::function<void()> on_gone)> on_disconnect;

  // The value of header `name` (lower-case), if present.
  std::optional<std::string_view> Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return std::string_view(v);
    }
    return std::nullopt;
  }
};

// The body of a streamed response, written in pieces as they become ready (chunked transfer
// encoding; e.g. server-sent events). Thread-safe; no call blocks.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Queues `data` as the next piece. False once the client is gone (a write failed or the
  // connection closed) or the server stopped: the producer should stop. A stream may outlive
  // its server, like a responder.
  virtual bool Write(std::string data) = 0;
  // Ends the body after the queued pieces. Call once; Write() after it is ignored.
  virtual void Finish() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  // A streamed response: if set, the status and headers go out at once (the body above is
  // ignored) and this is then called, on an I/O thread, with the stream to write the body to.
  std::function<void(std::shared_ptr<HttpStream>)> stream;
  // For the access log (access_log.h): what only the handler knows.
  struct Access {
    std::string model;
    int64_t rows = -1;        // -1: unknown
    double queue_ms = -1;     // arrival to first dispatch; -1: unknown
    double compute_ms = -1;   // first dispatch to the answer; -1: unknown
  } access;
};

// Sends the response for one request. Call exactly once, from any thread; never blocks.
// Lifetime: a responder keeps its connection (and the server's I/O context) alive; it may be
// called or destroyed after the server stopped or was destroyed, when its answer is dropped.
// HttpServer::Stop waits for the answers of every request it handed out, up to its deadline.
using HttpResponder = std::function<void(HttpResponse)>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Handles one request on an I/O thread. Must not block: long work answers through
  // `respond` later, from another thread.
  virtual void Handle(HttpRequest request, HttpResponder respond) = 0;
};

}  // namespace packrat
