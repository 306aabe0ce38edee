#include "tests/agent/metrics/prometheus_server.h"

#include <signal.h>

#include <charconv>
#include <fstream>

#include "tests/agent/metrics/poll_until.h"

namespace packrat::metrics::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr seconds kStartTimeout{15};

std::unique_ptr<PrometheusServer> PrometheusServer::Start(const std::string& dir,
                                                          uint16_t target_port,
                                                          std::string* error) {
  const std::string config = dir + "/prometheus.yml";
  std::ofstream(config) << "global:\n"
                           "  scrape_interval: 1s\n"
                           "  scrape_timeout: 1s\n"
                           "  evaluation_interval: 1s\n"
                           "scrape_configs:\n"
                           "  - job_name: packrat\n"
                           "    static_configs:\n"
                           "      - targets: ['127.0.0.1:"
                        << target_port << "']\n";
  auto process = ChildProcess::Start(
      {"prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir + "/data",
       "--web.listen-address=127.0.0.1:0", "--log.level=info"},
      error);
  if (process == nullptr) {
    *error += " (install the Debian package prometheus: scripts/setup.sh)";
    return nullptr;
  }
  // ts=... msg="Listening on" address=127.0.0.1:40123
  const auto line = process->WaitForLine(
      [](std::string_view l) {
        return l.find("msg=\"Listening on\"") != std::string_view::npos &&
               l.find("address=127.0.0.1:") != std::string_view::npos;
      },
      kStartTimeout);
  if (!line) {
    *error = "prometheus did not start:\n" + process->Output();
    return nullptr;
  }
  const std::string_view key = "address=127.0.0.1:";
  const size_t at = line->rfind(key) + key.size();
  uint16_t port = 0;
  if (std::from_chars(line->data() + at, line->data() + line->size(), port).ec != std::errc()) {
    *error = "cannot read the port from: " + *line;
    return nullptr;
  }
  if (!process->WaitForLine(
          [](std::string_view l) { return l.find("Server is ready") != std::string_view::npos; },
          kStartTimeout)) {
    *error = "prometheus did not become ready:\n" + process->Output();
    return nullptr;
  }
  return std::unique_ptr<PrometheusServer>(new PrometheusServer(std::move(process), port));
}

PrometheusServer::~PrometheusServer() { Stop(); }

std::optional<int> PrometheusServer::Stop() { return process_->Stop(SIGTERM, seconds(10)); }

simdjson::simdjson_result<simdjson::dom::element> PrometheusServer::Api(
    const std::string& endpoint) {
  last_ = HttpGet(port_, "/api/v1/" + endpoint, seconds(5));
  if (last_.status != 200) return simdjson::IO_ERROR;
  simdjson::dom::element doc;
  if (parser_.parse(last_.body).get(doc) != simdjson::SUCCESS) return simdjson::TAPE_ERROR;
  std::string_view status;
  if (doc["status"].get(status) != simdjson::SUCCESS || status != "success") {
    return simdjson::INCORRECT_TYPE;
  }
  return doc["data"];
}

std::optional<std::string> PrometheusServer::QueryOne(const std::string& promql) {
  simdjson::dom::array result;
  if (Api("query?query=" + UrlEncode(promql))["result"].get(result) != simdjson::SUCCESS ||
      result.size() != 1) {
    return std::nullopt;
  }
  std::string_view value;
  if (result.at(0)["value"].at(1).get(value) != simdjson::SUCCESS) return std::nullopt;
  return std::string(value);
}

bool PrometheusServer::EventuallyEquals(const std::string& promql, const std::string& want,
                                        milliseconds timeout, std::string* explain) {
  std::optional<std::string> got;
  const bool ok = PollUntil(
      [&] {
        got = QueryOne(promql);
        return got == want;
      },
      timeout, milliseconds(200));
  if (!ok && explain != nullptr) {
    *explain = promql + ": want " + want + ", got " + got.value_or("(no sample)") +
               "; last answer " + std::to_string(last_.status) + " " + last_.error + " " +
               last_.body;
  }
  return ok;
}

}  // namespace packrat::metrics::testing
