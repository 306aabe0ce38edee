// The real agent's /metrics: the series it exports after real traffic, checked by value, by
// `promtool check metrics`, and through a real Prometheus server scraping it.
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/agent/metrics/child_process.h"
#include "tests/agent/metrics/prometheus_server.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;

std::string Config() {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
         "models:\n"
         "  - name: cnn\n"
         "    path: " +
         kModels +
         "/small_cnn.pt\n"
         "    inputs: [{name: image, datatype: FP32, shape: [-1, 3, 32, 32]}]\n"
         "    outputs: [{name: logits, datatype: FP32, shape: [-1, 10]}]\n"
         "    batching: {max_batch: 8, max_delay_us: 1000}\n"
         "    instances: [{count: 2, threads: 1, batch: 4}]\n"
         "    warmup_iterations: 1\n";
}

std::string Image(int rows) {
  std::string data;
  for (int i = 0; i < rows * 3 * 32 * 32; ++i) data += i ? ",0.25" : "0.25";
  return R"({"inputs":[{"name":"image","shape":[)" + std::to_string(rows) +
         R"(,3,32,32],"datatype":"FP32","data":[)" + data + "]}]}";
}

class AgentMetricsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_ = std::make_unique<testing::AgentProcess>(PACKRAT_AGENT_PATH, Config());
    ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
    testing::HttpClient client("127.0.0.1", agent_->http_port());
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(client.Post("/v2/models/cnn/infer", Image(1 + i % 3)).status, 200);
    }
    EXPECT_EQ(client.Post("/v2/models/cnn/infer", "{not json").status, 400);
    EXPECT_EQ(client.Post("/v2/models/cnn/infer", Image(9)).status, 400);  // rows > max_batch
    EXPECT_EQ(client.Post("/v2/models/unknown/infer", Image(1)).status, 404);
  }
  void TearDown() override { agent_->Stop(SIGTERM); }

  std::string Scrape() {
    testing::HttpClient metrics("127.0.0.1", agent_->metrics_port());
    const auto r = metrics.Get("/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    return r.body;
  }

  testing::TempDir temp_{"packrat-metrics"};
  const std::string dir_ = temp_.path();
  std::unique_ptr<testing::AgentProcess> agent_;
};

TEST_F(AgentMetricsIntegrationTest, ExportsTheServingSeries) {
  const std::string page = Scrape();
  auto has = [&](const std::string& line) {
    EXPECT_NE(page.find("\n" + line + "\n"), std::string::npos) << line << "\n" << page;
  };
  has(R"(packrat_requests_total{code="200",model="cnn"} 5)");
  has(R"(packrat_requests_total{code="400",model="cnn"} 2)");
  has(R"(packrat_request_duration_seconds_count{model="cnn"} 7)");
  has(R"(packrat_queue_duration_seconds_count{model="cnn"} 5)");
  has(R"(packrat_inflight_requests{model="cnn"} 0)");
  has(R"(packrat_queue_rows{model="cnn"} 0)");
  has(R"(packrat_target_batch_rows{model="cnn"} 8)");
  has(R"(packrat_instances{batch="4",model="cnn",state="ready",threads="1"} 2)");
  // Which isolation the two runtimes really got, as the management API reports each one's.
  const std::string config =
      testing::HttpClient("127.0.0.1", agent_->management_port()).Get("/v2/models/cnn/config").body;
  int in_cgroups = 0;
  for (size_t at = 0; (at = config.find("\"isolation\":\"cgroup\"", at)) != std::string::npos;
       ++at) {
    ++in_cgroups;
  }
  int pinned = 0;
  for (size_t at = 0; (at = config.find("\"isolation\":\"affinity\"", at)) != std::string::npos;
       ++at) {
    ++pinned;
  }
  EXPECT_EQ(in_cgroups + pinned, 2) << config;
  has(R"(packrat_runtime_isolation{isolation="cgroup",model="cnn"} )" + std::to_string(in_cgroups));
  has(R"(packrat_runtime_isolation{isolation="affinity",model="cnn"} )" + std::to_string(pinned));
  // 1+2+3+1+2 = 9 rows went through the runtimes, in slices of at most 4.
  has(R"(packrat_batch_size_rows_sum{model="cnn"} 9)");
  EXPECT_EQ(page.find("unknown"), std::string::npos);  // no series for unknown model names
  EXPECT_NE(page.find("\npackrat_build_info{version=\"" PACKRAT_VERSION "\"} 1\n"),
            std::string::npos);
  EXPECT_NE(page.find("\nprocess_resident_memory_bytes "), std::string::npos);
  // Each runtime's own CPU time and memory, one series per process.
  for (const pid_t pid : agent_->RuntimePids()) {
    const std::string labels = "{model=\"cnn\",pid=\"" + std::to_string(pid) + "\"} ";
    EXPECT_NE(page.find("\npackrat_runtime_cpu_seconds_total" + labels), std::string::npos)
        << pid << "\n"
        << page;
    EXPECT_NE(page.find("\npackrat_runtime_resident_memory_bytes" + labels), std::string::npos)
        << pid;
  }

  // promtool accepts the page.
  const std::string file = dir_ + "/metrics.txt";
  std::ofstream(file) << page;
  std::string error;
  auto promtool =
      metrics::testing::ChildProcess::Start({"promtool", "check", "metrics"}, &error, file);
  ASSERT_NE(promtool, nullptr) << error;
  const auto status = promtool->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << promtool->Output();
}

TEST_F(AgentMetricsIntegrationTest, PrometheusScrapesTheAgent) {
  std::string error;
  auto prometheus = metrics::testing::PrometheusServer::Start(dir_, agent_->metrics_port(), &error);
  ASSERT_NE(prometheus, nullptr) << error;
  std::string explain;
  EXPECT_TRUE(prometheus->EventuallyEquals(R"(packrat_requests_total{model="cnn",code="200"})", "5",
                                           std::chrono::seconds(20), &explain))
      << explain;
  EXPECT_EQ(prometheus->QueryOne(R"(up{job="packrat"})"), "1");
  EXPECT_EQ(
      prometheus->QueryOne(R"(sum(packrat_instances{job="packrat",model="cnn",state="ready"}))"),
      "2");
  EXPECT_EQ(prometheus->QueryOne(R"(sum(packrat_requests_total{job="packrat",model="cnn"}))"), "7");
  // The dashboard's latency query works on the agent's buckets.
  EXPECT_TRUE(prometheus
                  ->QueryOne(R"(histogram_quantile(0.99, sum by (le) )"
                             R"((packrat_request_duration_seconds_bucket{model="cnn"})))")
                  .has_value());
}

}  // namespace
}  // namespace packrat
