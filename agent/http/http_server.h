// An HTTP/1.1 server (Boost.Beast) with keep-alive, size limits and idle timeouts, that hands
// every request to an HttpHandler. It listens on a TCP endpoint and, optionally, also on a Unix
// domain socket, serving both with the same handler, threads and limits.
//
// Threading: `threads` Asio threads run all connections; each connection is on its own strand.
// Failure policy: unparseable requests get 400, oversized bodies 413, oversized headers 431,
// each with a JSON error, and the connection is closed; a connection beyond max_connections gets
// 503 and is closed; a client that sends its headers slower than idle_timeout or its body slower
// than read_timeout is disconnected. Other connections are unaffected.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/config/config.h"
#include "agent/http/access_log.h"
#include "agent/http/http_types.h"
#include "common/status.h"

namespace packrat {

struct HttpServerOptions {
  Endpoint endpoint;
  // If not empty, the same handler is also served on this Unix domain socket path (at most
  // kMaxUnixSocketPath bytes). A stale socket file there (nobody accepts on it) is replaced; a
  // live socket or any other kind of file is an error. The socket is made mode 0666, so any
  // local user that can reach its folder may connect: the folder's permissions are the access
  // control. Stop() removes it (unless another server has replaced it meanwhile).
  std::string unix_socket;
  int threads = 2;
  uint64_t max_body_bytes = 64ull << 20;
  uint64_t max_header_bytes = 16ull << 10;
  std::chrono::seconds idle_timeout{60};  // waiting for a request's headers (and keep-alive)
  std::chrono::seconds read_timeout{30};  // a request's body, once its headers have arrived
  // Open connections beyond this are answered 503 and closed at once.
  int64_t max_connections = 1024;
  std::string name = "http";  // for logs and the access log's `listener`
  // Not owned; must outlive the server. Null: no access log. Every answer carries
  // X-Request-Id either way (HttpRequest::request_id).
  const AccessLog* access_log = nullptr;
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
  // Stops accepting new connections (TCP and Unix); open connections keep being served.
  void StopAccepting();
  // Waits until no request is in progress (or `deadline`), then closes every connection, joins
  // the threads and removes the Unix socket file. Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);

  class Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl);
  // Shared with every connection: a connection that a responder or stream keeps past the
  // server's destruction still has its io_context (which no thread runs any more).
  std::shared_ptr<Impl> impl_;
};

}  // namespace packrat
