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
#include "tests/agent/metrics/populated_metrics.h"
#include "tests/agent/metrics/prometheus_server.h"

namespace packrat::metrics::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

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
      EXPECT_TRUE(prometheus_->Stop().has_value()) << "prometheus ignored SIGTERM";
      if (HasFailure()) std::cerr << "prometheus output:\n" << prometheus_->Output();
      prometheus_.reset();
    }
    fs::remove_all(dir_);
  }

  void StartPrometheus(uint16_t target_port) {
    std::string error;
    prometheus_ = PrometheusServer::Start(dir_, target_port, &error);
    ASSERT_NE(prometheus_, nullptr) << error;
  }
  std::optional<std::string> QueryOne(const std::string& promql) {
    return prometheus_->QueryOne(promql);
  }
  bool EventuallyEquals(const std::string& promql, const std::string& want) {
    std::string explain;
    const bool ok = prometheus_->EventuallyEquals(promql, want, kScrapeTimeout, &explain);
    if (!ok) ADD_FAILURE() << explain;
    return ok;
  }

  std::string dir_;
  std::unique_ptr<PrometheusServer> prometheus_;
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
  ASSERT_TRUE(scraped.has_value()) << prometheus_->last_answer().body;
  EXPECT_EQ(scraped, QueryOne(R"(count({job="packrat",__name__!~"up|scrape_.*"}))"));

  // Escaped label values arrive intact: Prometheus unescaped them to our model name.
  simdjson::dom::array series;
  ASSERT_EQ(prometheus_->Api("series?match[]=" + UrlEncode("packrat_requests_total")).get(series),
            simdjson::SUCCESS)
      << prometheus_->last_answer().body;
  bool found = false;
  for (simdjson::dom::element s : series) {
    std::string_view model, code;
    if (s["model"].get(model) == simdjson::SUCCESS && s["code"].get(code) == simdjson::SUCCESS) {
      found |= model == kAwkwardModel && code == "400";
    }
  }
  EXPECT_TRUE(found) << prometheus_->last_answer().body;

  // Later updates show up in later scrapes.
  for (int i = 0; i < 8; ++i) metrics.ForModel("demo").requests(200).Increment();
  EXPECT_TRUE(EventuallyEquals(R"(packrat_requests_total{model="demo",code="200"})", "50"));
}

}  // namespace
}  // namespace packrat::metrics::testing
