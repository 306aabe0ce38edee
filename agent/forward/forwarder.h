// The core of packrat-forward, the sidecar that lets an application pod reach its node's agent
// at a local address: a TCP listener whose every connection is spliced, byte for byte, to a new
// connection to the upstream (the agent's Unix socket on a shared hostPath, or its TCP port).
//
// It is an L4 proxy: it never parses what passes through. Bodies stream through two bounded
// buffers per connection (one per direction) and are never held whole; keep-alive, status codes
// and error bodies pass untouched; a half-close (FIN) in one direction is passed on while the
// other direction keeps flowing, and the connection ends when both directions have ended or
// either side resets.
//
// Failure policy: when the upstream cannot be reached (refused, no socket file, connect timeout)
// the client's request head is read (up to CRLFCRLF, at most max_head_bytes, within
// head_timeout) and answered `503 Service Unavailable` with
// `{"error":"packrat agent unreachable: <reason>"}` and `Connection: close` — an HTTP/2 client
// (gRPC, whose bytes pass as any others while the agent is up) gets a GOAWAY with
// that reason instead, so its call fails UNAVAILABLE; the rest of the request is read and
// discarded for at most linger_timeout (so the client sees the answer, not a
// reset), then the connection is closed. Other connections are unaffected.
//
// Threading: `threads` Asio threads run all connections; each connection is on its own strand.
// Create, Start and Shutdown are called from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/config/config.h"
#include "common/status.h"

namespace packrat {

// Where the forwarder connects to.
struct ForwardUpstream {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix: the socket file
  Endpoint tcp;      // kTcp: the host (a name is resolved once, at Forwarder::Create) and port

  // "unix:/run/packrat/agent.sock" or "tcp:10.0.0.1:8080".
  std::string ToString() const;
};

// Parses "unix:PATH" or "tcp:HOST:PORT" ("tcp:[::1]:8080" for IPv6).
StatusOr<ForwardUpstream> ParseUpstream(const std::string& text);

struct ForwarderOptions {
  Endpoint listen{"127.0.0.1", 8080};  // port 0 picks a free port (see Forwarder::port())
  ForwardUpstream upstream;
  std::chrono::milliseconds connect_timeout{1000};
  int threads = 1;                                 // Asio threads, 1 or 2 are plenty
  size_t buffer_bytes = 64 << 10;                  // per direction and connection
  size_t max_head_bytes = 16 << 10;                // read before answering 503
  std::chrono::milliseconds head_timeout{10000};   // for that read
  std::chrono::milliseconds linger_timeout{2000};  // discarding the rest after a 503
};

class Forwarder {
 public:
  // Resolves the upstream, binds and listens at once (so port() is known), but accepts only
  // after Start(). Errors: kInvalidArgument for a bad address or option, kUnavailable when the
  // listen address cannot be bound or a TCP upstream host does not resolve.
  static StatusOr<std::unique_ptr<Forwarder>> Create(const ForwarderOptions& options);
  ~Forwarder();  // Shutdown()s at once

  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  uint16_t port() const;
  void Start();
  // Connections accepted and not yet closed. Thread-safe.
  size_t open_connections() const;
  // Closes the listener (blocks until it is closed: new connections are refused from then on);
  // open connections keep flowing. Idempotent.
  void StopAccepting();
  // StopAccepting(), then blocks until every open connection has ended or `deadline`, closes
  // those left and joins the threads. Idempotent.
  void Shutdown(std::chrono::steady_clock::time_point deadline);

  class Impl;

 private:
  explicit Forwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat
