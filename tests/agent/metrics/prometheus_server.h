// A real Prometheus server (Debian package prometheus) for tests: scrapes one loopback target
// every second, listens on a port of its own choosing, and answers instant queries. Waits block
// on its log lines or poll its API on a timer; nothing sleeps.
#pragma once

#include <simdjson.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tests/agent/metrics/child_process.h"
#include "tests/agent/metrics/http_get.h"

namespace packrat::metrics::testing {

class PrometheusServer {
 public:
  // Starts Prometheus with its data in `dir`, scraping 127.0.0.1:`target_port`/metrics as job
  // "packrat". nullptr with `error` set if it could not start.
  static std::unique_ptr<PrometheusServer> Start(const std::string& dir, uint16_t target_port,
                                                 std::string* error);
  ~PrometheusServer();  // SIGTERM, then SIGKILL if needed

  // GET /api/v1/<endpoint>: the parsed "data" member, or an error value on any failure.
  simdjson::simdjson_result<simdjson::dom::element> Api(const std::string& endpoint);
  // The value of an instant query that yields exactly one sample, as Prometheus prints it.
  std::optional<std::string> QueryOne(const std::string& promql);
  // Polls until `promql` yields one sample equal to `want` or `timeout` passes; on failure
  // *explain says what was seen last.
  bool EventuallyEquals(const std::string& promql, const std::string& want,
                        std::chrono::milliseconds timeout, std::string* explain);
  // Stops the server; its exit status, or nullopt if it had to be killed.
  std::optional<int> Stop();
  std::string Output() const { return process_->Output(); }
  const HttpGetResult& last_answer() const { return last_; }

 private:
  PrometheusServer(std::unique_ptr<ChildProcess> process, uint16_t port)
      : process_(std::move(process)), port_(port) {}

  std::unique_ptr<ChildProcess> process_;
  uint16_t port_;
  simdjson::dom::parser parser_;
  HttpGetResult last_;
};

}  // namespace packrat::metrics::testing
