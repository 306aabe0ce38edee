// An HTTP/1.1 server (Boost.Beast) with keep-alive, size limits and idle timeouts, that hands
// every request to an HttpHandler.
//
// Threading: `threads` Asio threads run all connections; each connection is on its own strand.
// Failure policy: unparseable requests get 400, oversized bodies 413, oversized headers 431,
// each with a JSON error, and the connection is closed; other connections are unaffected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/config/config.h"
#include "agent/http/http_types.h"
#include "common/status.h"

namespace packrat {

struct HttpServerOptions {
  Endpoint endpoint;
  int threads = 2;
  uint64_t max_body_bytes = 64ull << 20;
  uint64_t max_header_bytes = 16ull << 10;
  std::chrono::seconds idle_timeout{60};
  std::string name = "http";  // for logs
};

class HttpServer {
 public:
  // Binds and listens at once (so port() is known), but accepts only after Start().
  // `handler` is not owned and must outlive the server.
  static StatusOr<std::unique_ptr<HttpServer>> Create(const HttpServerOptions& options,
                                                      HttpHandler* handler);
  ~HttpServer();  // Stop()s

  uint16_t port() const;
  void Start();
  // Stops accepting new connections; open connections keep being served.
  void StopAccepting();
  // Waits until no request is in progress (or `deadline`), then closes every connection and
  // joins the threads. Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat
