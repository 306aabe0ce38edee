// A minimal blocking HTTP GET over plain sockets, for talking to a Prometheus server on
// loopback: one request per connection (HTTP/1.0, so the answer is never chunked), with a
// timeout on connect, send and receive.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace packrat::metrics::testing {

struct HttpGetResult {
  int status = 0;            // 0 when no answer came back
  std::string content_type;  // the Content-Type header, if any
  std::string body;
  std::string error;  // transport or parse error, if any
};

// GET http://127.0.0.1:<port><target>. Never throws; blocks at most about `timeout` per step.
HttpGetResult HttpGet(uint16_t port, const std::string& target,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Percent-encodes everything but unreserved characters (for a query string value).
std::string UrlEncode(std::string_view text);

}  // namespace packrat::metrics::testing
