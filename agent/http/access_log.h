// AccessLog: one line per answered request, for operators (`server.access_log`; off by
// default). JSON lines or logfmt, with these fields (absent where unknown):
//
//   time         RFC 3339 UTC with milliseconds, when the answer was sent
//   listener     "http", "management" or "grpc" (agent/grpc/grpc_access_log.h)
//   request_id   X-Request-Id as the client sent it, or the one the agent generated
//   trace_id     the trace id of a W3C `traceparent` header, if the request carried one
//   method, path the request line (query string dropped: it may carry secrets)
//   status       the HTTP status
//   grpc_status  gRPC calls: the gRPC status code's name (status: REST's status for it)
//   model, rows  the model and the request's rows (inference and generation)
//   duration_ms  from the request's headers being read to the answer
//   queue_ms     from arrival to its first batch being dispatched (inference)
//   compute_ms   from that dispatch to the answer (inference)
//   bytes_in, bytes_out  request and response bodies
//
// Lines go to a file or stdout with one write(2) each (O_APPEND: lines of concurrent requests
// never interleave).
//
// Thread-safety: Write() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace packrat {

struct AccessLogEntry {
  std::chrono::system_clock::time_point time;
  std::string listener;
  std::string request_id;
  std::string trace_id;
  std::string method;
  std::string path;
  int status = 0;
  std::string grpc_status;  // gRPC calls only
  std::string model;
  int64_t rows = -1;  // -1: unknown
  double duration_ms = 0;
  double queue_ms = -1;    // -1: unknown
  double compute_ms = -1;  // -1: unknown
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

class AccessLog {
 public:
  enum class Format { kJson, kLogfmt };

  // `path` "-" or empty: stdout. NotFound-style errors name the path.
  static StatusOr<std::unique_ptr<AccessLog>> Open(Format format, const std::string& path);
  ~AccessLog();

  void Write(const AccessLogEntry& entry) const;
  // The line for `entry`, newline included (tests).
  std::string Format(const AccessLogEntry& entry) const;

 private:
  AccessLog(enum Format format, int fd, bool owned) : format_(format), fd_(fd), owned_(owned) {}

  const enum Format format_;
  const int fd_;
  const bool owned_;
};

// A fresh request id: 32 lower-case hex digits (128 random bits).
std::string NewRequestId();
// Whether a client's X-Request-Id may be used as is: 1–128 printable ASCII characters, no
// quotes or backslashes (it goes into log lines and response headers).
bool UsableRequestId(std::string_view id);
// The trace id (32 hex digits) of a W3C traceparent "00-<trace id>-<parent id>-<flags>"; "" if
// the header is malformed.
std::string TraceIdOf(std::string_view traceparent);

}  // namespace packrat
