// Layered batching through the real agent and runtimes: a staged CNN served with
// `batching: {mode: layered}`; concurrent clients send requests of one and two rows, every
// answer is checked against direct libtorch, each request is answered exactly once, rows did
// join running batches (metrics), and the stage profile and N_opt are on the model's metadata.
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_runner.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;

const std::string kModels = PACKRAT_MODELS_DIR;
constexpr int64_t kRow = 3 * 64 * 64;
constexpr int64_t kClasses = 10;

std::string Config(const std::string& instances) {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
         "models:\n"
         "  - name: cnn\n"
         "    path: " +
         kModels +
         "/staged_cnn.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 64, 64]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 10]}]\n"
         "    batching: {mode: layered, latency_budget_ms: 400, profile_repeats: 2}\n"
         "    instances: " +
         instances +
         "\n"
         "    warmup_iterations: 1\n";
}

struct Sample {
  std::string header;  // JSON part of the binary-extension request
  std::string body;    // header + raw floats
  std::vector<float> expected;
};

std::vector<Sample> MakeSamples(int n) {
  runtime::ModelRunnerOptions o;
  o.model_path = kModels + "/staged_cnn.pt";
  auto runner = runtime::ModelRunner::Create(o);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<Sample> samples;
  for (int i = 0; i < n; ++i) {
    const int64_t rows = 1 + i % 2;
    std::vector<float> x(rows * kRow);
    for (float& f : x) f = normal(rng);
    Sample s;
    s.header =
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + std::to_string(rows) +
        ",3,64,64],\"parameters\":{\"binary_data_size\":" + std::to_string(x.size() * 4) + "}}]}";
    s.body = s.header + std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    runtime::RawTensor in{DataType::kFp32, {rows, 3, 64, 64}, x.data(), x.size() * 4};
    std::vector<uint8_t> out(1 << 14);
    std::vector<runtime::RawTensor> outputs;
    EXPECT_TRUE((*runner)->Run({in}, out.data(), out.size(), &outputs).ok());
    const float* y = static_cast<const float*>(outputs[0].data);
    s.expected.assign(y, y + rows * kClasses);
    samples.push_back(std::move(s));
  }
  return samples;
}

bool Matches(const std::string& body, const std::vector<float>& expected) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS) return false;
  std::vector<double> got;
  for (simdjson::dom::element v : doc["outputs"].at(0)["data"].get_array())
    got.push_back(double(v));
  if (got.size() != expected.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - expected[i]) > 1e-4 * (1 + std::fabs(expected[i]))) return false;
  }
  return true;
}

double Metric(const std::string& page, const std::string& series) {
  const size_t at = page.find(series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + series.size() + 1);
}

class LayeredIntegrationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayeredIntegrationTest, ConcurrentClientsGetTheModelsOutputsAndRowsJoinRunningBatches) {
  const std::vector<Sample> samples = MakeSamples(24);
  AgentProcess agent(PACKRAT_AGENT_PATH, Config(GetParam()));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  ASSERT_TRUE(agent.WaitForLog("layered batching at 1 thread(s): 4 stages")) << agent.Digest();

  // The stage profile's figures are on the metadata.
  HttpClient management("127.0.0.1", agent.management_port());
  const HttpResult meta = management.Get("/v2/models/cnn");
  ASSERT_EQ(meta.status, 200) << meta.body;
  simdjson::dom::parser parser;
  simdjson::dom::element layered = parser.parse(meta.body)["parameters"]["layered"].at(0);
  EXPECT_EQ(int64_t(layered["stages"]), 4);
  EXPECT_EQ(int64_t(layered["profiled_batch"]), 8);
  EXPECT_DOUBLE_EQ(double(layered["latency_budget_ms"]), 400);
  EXPECT_GE(int64_t(layered["optimal_batch"]), 1);
  EXPECT_LE(double(layered["strict_budget_ms"]), 400);

  // Six closed-loop clients: while one batch runs, others' requests queue and may join it.
  constexpr int kClients = 6, kPerClient = 40;
  std::mutex mu;
  std::map<int, int> codes;
  int wrong = 0, answered = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client("127.0.0.1", agent.http_port());
      for (int i = 0; i < kPerClient; ++i) {
        const Sample& s = samples[(c * 7 + i) % samples.size()];
        const HttpResult r =
            client.Post("/v2/models/cnn/infer", s.body,
                        {{"Inference-Header-Content-Length", std::to_string(s.header.size())}});
        std::lock_guard<std::mutex> lock(mu);
        ++answered;
        ++codes[r.status];
        if (r.status == 200 && !Matches(r.body, s.expected)) ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  // Every request got exactly one answer (a closed loop cannot send the next before), all
  // right.
  EXPECT_EQ(answered, kClients * kPerClient);
  EXPECT_EQ(codes[200], kClients * kPerClient) << "other codes: " << codes.size();
  EXPECT_EQ(wrong, 0);

  HttpClient metrics("127.0.0.1", agent.metrics_port());
  const std::string page = metrics.Get("/metrics").body;
  const double joined =
      Metric(page, "packrat_topup_queries_total{model=\"cnn\",outcome=\"joined\"}");
  const double rows = Metric(page, "packrat_topup_rows_total{model=\"cnn\"}");
  EXPECT_GT(joined, 0) << page;
  EXPECT_GE(rows, joined);
  EXPECT_GT(Metric(page, "packrat_topup_predicted_latency_seconds_count{model=\"cnn\"}"), 0);
  EXPECT_GE(Metric(page, "packrat_layered_optimal_batch_rows{model=\"cnn\"}"), 1);
  EXPECT_TRUE(agent.WaitForLog("row(s) join")) << "the admission is in the debug log";

  const auto status = agent.Stop(SIGTERM);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent.Digest();
}

INSTANTIATE_TEST_SUITE_P(Instances, LayeredIntegrationTest,
                         ::testing::Values("[{count: 1, threads: 1, batch: 8}]",
                                           "[{count: 2, threads: 1, batch: 8}]"),
                         [](const auto& info) { return info.index == 0 ? "One" : "Two"; });

TEST(LayeredConfigTest, AModelWithoutStagesFailsToLoadWithTheReason) {
  AgentProcess agent(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
      "models:\n"
      "  - name: flat\n"
      "    path: " +
          kModels +
          "/small_cnn.pt\n"
          "    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 32, 32]}]\n"
          "    outputs: [{name: y, datatype: FP32, shape: [-1, 10]}]\n"
          "    batching: {mode: layered, latency_budget_ms: 100, profile_repeats: 1}\n"
          "    instances: [{count: 1, threads: 1, batch: 2}]\n"
          "    warmup_iterations: 1\n");
  // Strict readiness: a model that does not load ends start-up, with the reason.
  EXPECT_TRUE(agent.WaitForLog("cannot start: model 'flat': ")) << agent.Digest();
  EXPECT_TRUE(agent.WaitForLog("is not staged")) << agent.Digest();
  const auto status = agent.Stop(0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << agent.Digest();
}

}  // namespace
}  // namespace packrat
