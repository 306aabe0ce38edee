#include "agent/metrics/agent_metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace packrat::metrics {
namespace {

bool Contains(const std::string& page, const std::string& text) {
  return page.find(text) != std::string::npos;
}

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AgentMetricsOptions options;
    options.proc_root = "";  // only the process tests read /proc
    auto created = AgentMetrics::Create(options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    metrics_ = std::move(created).value();
  }

  std::unique_ptr<AgentMetrics> metrics_;
};

TEST_F(AgentMetricsTest, ForModelReturnsOneStableObjectPerModel) {
  ModelMetrics& demo = metrics_->ForModel("demo");
  EXPECT_EQ(&demo, &metrics_->ForModel("demo"));
  EXPECT_NE(&demo, &metrics_->ForModel("other"));
  EXPECT_EQ(demo.model(), "demo");
  EXPECT_EQ(&demo.requests(200), &demo.requests(200));
  EXPECT_NE(&demo.requests(200), &metrics_->ForModel("other").requests(200));
}

TEST_F(AgentMetricsTest, EveryFamilyIsExportedWithItsModelLabel) {
  ModelMetrics& m = metrics_->ForModel("demo");
  m.requests(200).Increment();
  m.requests(200).Increment();
  m.requests(429).Increment();
  m.requests(1000).Increment();  // outside the cached range still counts
  m.request_duration().Observe(0.02);
  m.queue_duration().Observe(0.001);
  m.compute_duration().Observe(0.015);
  m.batch_size().Observe(8);
  m.inflight().Increment();
  m.target_batch().Set(16);
  m.estimated_batch().Set(12.5);
  m.reconfigurations().Increment();
  m.runtime_restarts().Increment();
  m.predicted_batch_latency().Set(0.012);
  m.measured_batch_latency().Set(0.0135);
  const std::string page = metrics_->Render();
  for (const char* line : {
           "packrat_requests_total{code=\"200\",model=\"demo\"} 2\n",
           "packrat_requests_total{code=\"429\",model=\"demo\"} 1\n",
           "packrat_requests_total{code=\"1000\",model=\"demo\"} 1\n",
           "packrat_request_duration_seconds_bucket{model=\"demo\",le=\"0.025\"} 1\n",
           "packrat_request_duration_seconds_bucket{model=\"demo\",le=\"0.01\"} 0\n",
           "packrat_request_duration_seconds_count{model=\"demo\"} 1\n",
           "packrat_queue_duration_seconds_sum{model=\"demo\"} 0.001\n",
           "packrat_compute_duration_seconds_count{model=\"demo\"} 1\n",
           "packrat_batch_size_rows_bucket{model=\"demo\",le=\"4\"} 0\n",
           "packrat_batch_size_rows_bucket{model=\"demo\",le=\"8\"} 1\n",
           "packrat_inflight_requests{model=\"demo\"} 1\n",
           "packrat_target_batch_rows{model=\"demo\"} 16\n",
           "packrat_estimated_batch_rows{model=\"demo\"} 12.5\n",
           "packrat_reconfigurations_total{model=\"demo\"} 1\n",
           "packrat_runtime_restarts_total{model=\"demo\"} 1\n",
           "packrat_predicted_batch_latency_seconds{model=\"demo\"} 0.012\n",
           "packrat_measured_batch_latency_seconds{model=\"demo\"} 0.0135\n",
           "# TYPE packrat_requests_total counter\n",
           "# TYPE packrat_request_duration_seconds histogram\n",
           "# TYPE packrat_inflight_requests gauge\n",
       }) {
    EXPECT_TRUE(Contains(page, line)) << "missing: " << line << "in:\n" << page;
  }
  EXPECT_FALSE(Contains(page, "process_")) << "proc_root was empty";
}

TEST_F(AgentMetricsTest, SetInstancesReplacesTheModelsSeries) {
  ModelMetrics& demo = metrics_->ForModel("demo");
  ModelMetrics& other = metrics_->ForModel("other");
  other.SetInstances({{1, 1, "ready", 4}});
  demo.SetInstances({{1, 4, "ready", 2}, {2, 8, "warming", 1}});
  std::string page = metrics_->Render();
  EXPECT_TRUE(Contains(
      page, "packrat_instances{batch=\"4\",model=\"demo\",state=\"ready\",threads=\"1\"} 2\n"));
  EXPECT_TRUE(Contains(
      page, "packrat_instances{batch=\"8\",model=\"demo\",state=\"warming\",threads=\"2\"} 1\n"));

  demo.SetInstances({{2, 8, "ready", 3}});
  page = metrics_->Render();
  EXPECT_FALSE(Contains(page, "state=\"warming\"")) << page;
  EXPECT_FALSE(Contains(page, "batch=\"4\"")) << page;
  EXPECT_TRUE(Contains(
      page, "packrat_instances{batch=\"8\",model=\"demo\",state=\"ready\",threads=\"2\"} 3\n"));
  EXPECT_TRUE(Contains(
      page, "packrat_instances{batch=\"1\",model=\"other\",state=\"ready\",threads=\"1\"} 4\n"));

  demo.SetInstances({});
  page = metrics_->Render();
  EXPECT_FALSE(Contains(page, "model=\"demo\",state=")) << page;
}

TEST_F(AgentMetricsTest, QueueRowsIsACallback) {
  int rows = 3;
  {
    CallbackHandle handle = metrics_->ForModel("demo").BindQueueRows([&rows] { return rows; });
    rows = 9;
    EXPECT_TRUE(Contains(metrics_->Render(), "packrat_queue_rows{model=\"demo\"} 9\n"));
  }
  EXPECT_FALSE(Contains(metrics_->Render(), "packrat_queue_rows"));
}

TEST_F(AgentMetricsTest, RequestsFromManyThreadsOnColdCodesAllCount) {
  ModelMetrics& m = metrics_->ForModel("demo");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 5000; ++i) m.requests(200 + i % 4).Increment();
    });
  }
  for (auto& thread : threads) thread.join();
  for (int code = 200; code < 204; ++code) EXPECT_EQ(m.requests(code).Value(), 8 * 5000 / 4);
}

TEST_F(AgentMetricsTest, ExportsProcessMetricsByDefault) {
  auto created = AgentMetrics::Create();
  ASSERT_TRUE(created.ok());
  const std::string page = (*created)->Render();
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    EXPECT_TRUE(Contains(page, std::string("\n") + name + " ")) << name << " in:\n" << page;
  }
}

TEST_F(AgentMetricsTest, RemoveModelDropsEverySeriesOfTheModel) {
  ModelMetrics& gone = metrics_->ForModel("gone");
  gone.requests(200).Increment();
  gone.request_duration().Observe(0.1);
  gone.SetInstances({{1, 4, "ready", 2}});
  gone.SetKernel("kernel=bf16 checked=1 max_rel_error=0.01", "bf16");
  CallbackHandle rows = gone.BindQueueRows([] { return 2; });
  metrics_->ForModel("kept").requests(200).Increment();
  ASSERT_TRUE(Contains(metrics_->Render(), "model=\"gone\""));
  rows.Reset();
  metrics_->RemoveModel("gone");
  const std::string page = metrics_->Render();
  EXPECT_FALSE(Contains(page, "model=\"gone\"")) << page;
  EXPECT_TRUE(Contains(page, "packrat_requests_total{code=\"200\",model=\"kept\"} 1\n")) << page;
  metrics_->RemoveModel("never");  // unknown: nothing happens
}

TEST_F(AgentMetricsTest, ProfileProgressIsARatio) {
  metrics_->ForModel("demo").profile_progress().Set(0.25);
  EXPECT_TRUE(Contains(metrics_->Render(), "packrat_profile_progress_ratio{model=\"demo\"} 0.25\n"));
}

TEST(AgentMetricsCreateTest, RejectsBadBuckets) {
  AgentMetricsOptions options;
  options.latency_buckets = {1, 0.5};
  EXPECT_EQ(AgentMetrics::Create(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrat::metrics
