// End to end: a real Prometheus server (Debian package prometheus) on loopback scrapes a
// MetricsRegistry served over HTTP every second, and its query API returns our series with the
// values we set. No sleeps: waits block on Prometheus' log lines or poll its API on a timer.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "agent/metrics/agent_metrics.h"
#include "tests/agent/metrics/child_process.h"
#include "tests/agent/metrics/http_get.h"
#include "tests/agent/metrics/metrics_http_server.h"
#include "tests/agent/metrics/poll_until.h"
#include "tests/agent/metrics/populated_metrics.h"

namespace packrat::metrics::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Budget for the whole test: Prometheus starts in about a second and scrapes every second.
constexpr seconds kStartTimeout{15};
constexpr seconds kScrapeTimeout{20};

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/packrat_prometheus_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (prometheus_ != nullptr) {
      const auto status = prometheus_->Stop(SIGTERM, seconds(10));
      EXPECT_TRUE(status.has_value()) << "prometheus ignored SIGTERM";
      if (HasFailure()) std::cerr << "prometheus output:\n" << prometheus_->Output();
      prometheus_.reset();
    }
    fs::remove_all(dir_);
  }

  // Starts Prometheus scraping 127.0.0.1:`target_port`/metrics every second, on a port of its
  // own choosing (read back from its log).
  void StartPrometheus(uint16_t target_port) {
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n"
                             "  scrape_interval: 1s\n"
                             "  scrape_timeout: 1s\n"
                             "  evaluation_interval: 1s\n"
                             "scrape_configs:\n"
                             "  - job_name: packrat\n"
                             "    static_configs:\n"
                             "      - targets: ['127.0.0.1:"
                          << target_port << "']\n";
    std::string error;
    prometheus_ = ChildProcess::Start(
        {"prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/data",
         "--web.listen-address=127.0.0.1:0", "--log.level=info"},
        &error);
    ASSERT_NE(prometheus_, nullptr)
        << error << " (install the Debian package prometheus: scripts/setup.sh)";
    // ts=... msg="Listening on" address=127.0.0.1:40123
    const auto line = prometheus_->WaitForLine(
        [](std::string_view l) {
          return l.find("msg=\"Listening on\"") != std::string_view::npos &&
                 l.find("address=127.0.0.1:") != std::string_view::npos;
        },
        kStartTimeout);
    ASSERT_TRUE(line.has_value()) << "prometheus did not start:\n" << prometheus_->Output();
    const size_t at =
        line->rfind("address=127.0.0.1:") + std::string_view("address=127.0.0.1:").size();
    const auto parsed = std::from_chars(line->data() + at, line->data() + line->size(), port_);
    ASSERT_EQ(parsed.ec, std::errc()) << *line;
    ASSERT_TRUE(prometheus_->WaitForLine(
        [](std::string_view l) { return l.find("Server is ready") != std::string_view::npos; },
        kStartTimeout))
        << prometheus_->Output();
  }

  // GET /api/v1/<endpoint>; the parsed "data" member, or an error value on any failure.
  simdjson::simdjson_result<simdjson::dom::element> Api(const std::string& endpoint) {
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

  // The value of an instant query that yields exactly one sample, as Prometheus prints it.
  std::optional<std::string> QueryOne(const std::string& promql) {
    simdjson::dom::array result;
    if (Api("query?query=" + UrlEncode(promql))["result"].get(result) != simdjson::SUCCESS ||
        result.size() != 1) {
      return std::nullopt;
    }
    std::string_view value;
    if (result.at(0)["value"].at(1).get(value) != simdjson::SUCCESS) return std::nullopt;
    return std::string(value);
  }

  // Polls until `promql` yields one sample equal to `want` (true) or kScrapeTimeout passes.
  bool EventuallyEquals(const std::string& promql, const std::string& want) {
    std::optional<std::string> got;
    const bool ok = PollUntil(
        [&] {
          got = QueryOne(promql);
          return got == want;
        },
        kScrapeTimeout, milliseconds(200));
    if (!ok) {
      ADD_FAILURE() << promql << ": want " << want << ", got " << got.value_or("(no sample)")
                    << "; last answer " << last_.status << " " << last_.error << " " << last_.body;
    }
    return ok;
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> prometheus_;
  uint16_t port_ = 0;
  simdjson::dom::parser parser_;
  HttpGetResult last_;
};

TEST_F(PrometheusScrapeTest, PrometheusScrapesTheRegistryAndFindsTheValues) {
  auto created = AgentMetrics::Create();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  AgentMetrics& metrics = **created;
  CallbackHandle queue = Populate(&metrics);

  std::string error;
  auto server = MetricsHttpServer::Start([&metrics] { return metrics.Render(); }, &error);
  ASSERT_NE(server, nullptr) << error;
  const HttpGetResult direct = HttpGet(server->port(), "/metrics");
  ASSERT_EQ(direct.status, 200) << direct.error;
  EXPECT_EQ(direct.content_type, kPrometheusContentType);

  ASSERT_NO_FATAL_FAILURE(StartPrometheus(server->port()));

  // The first scrape lands within a scrape interval of start-up.
  ASSERT_TRUE(EventuallyEquals(R"(packrat_requests_total{model="demo",code="200"})", "42"));
  EXPECT_TRUE(server->WaitForScrapes(1, seconds(1)));
  // Everything below came in the same scrape.
  EXPECT_EQ(QueryOne(R"(up{job="packrat"})"), "1");
  EXPECT_EQ(QueryOne(R"(packrat_requests_total{model="demo",code="503"})"), "3");
  EXPECT_EQ(QueryOne(R"(packrat_request_duration_seconds_count{model="demo"})"), "3");
  EXPECT_EQ(QueryOne(R"(packrat_request_duration_seconds_bucket{model="demo",le="0.025"})"), "2");
  EXPECT_EQ(QueryOne(R"(packrat_request_duration_seconds_bucket{model="demo",le="+Inf"})"), "3");
  // The dashboard's percentile query, on raw buckets: the median of {0.004, 0.02, 0.3} is
  // interpolated halfway through the (0.01, 0.025] bucket.
  EXPECT_EQ(QueryOne(R"(histogram_quantile(0.5, sum by (le) )"
                     R"((packrat_request_duration_seconds_bucket{model="demo"})))"),
            "0.0175");
  EXPECT_EQ(QueryOne(R"(packrat_instances{model="demo",threads="2",batch="4",state="ready"})"),
            "3");
  EXPECT_EQ(QueryOne(R"(packrat_predicted_batch_latency_seconds{model="demo"})"), "0.0125");
  EXPECT_EQ(QueryOne(R"(packrat_queue_rows{model="demo"})"), "5");
  EXPECT_EQ(QueryOne(R"(packrat_batch_size_rows_sum{model="demo"})"), "12");
  EXPECT_TRUE(QueryOne("process_resident_memory_bytes").has_value());
  // Prometheus stored every sample it parsed (none was dropped as malformed).
  const auto scraped = QueryOne(R"(scrape_samples_scraped{job="packrat"})");
  ASSERT_TRUE(scraped.has_value()) << last_.body;
  EXPECT_EQ(scraped, QueryOne(R"(count({job="packrat",__name__!~"up|scrape_.*"}))"));

  // Escaped label values arrive intact: Prometheus unescaped them to our model name.
  simdjson::dom::array series;
  ASSERT_EQ(Api("series?match[]=" + UrlEncode("packrat_requests_total")).get(series),
            simdjson::SUCCESS)
      << last_.body;
  bool found = false;
  for (simdjson::dom::element s : series) {
    std::string_view model, code;
    if (s["model"].get(model) == simdjson::SUCCESS && s["code"].get(code) == simdjson::SUCCESS) {
      found |= model == kAwkwardModel && code == "400";
    }
  }
  EXPECT_TRUE(found) << last_.body;

  // Later updates show up in later scrapes.
  for (int i = 0; i < 8; ++i) metrics.ForModel("demo").requests(200).Increment();
  EXPECT_TRUE(EventuallyEquals(R"(packrat_requests_total{model="demo",code="200"})", "50"));
}

}  // namespace
}  // namespace packrat::metrics::testing
