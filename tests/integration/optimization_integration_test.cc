// Kernel optimisations through the real agent: the runtime optimises an ordinary FP32
// TorchScript file at load, the API stays FP32, the accuracy guard's result is on the model's
// metadata and in the metrics; fallback and strict modes.
#include <signal.h>
#include <simdjson.h>

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;

const std::string kModels = PACKRAT_MODELS_DIR;

std::string CnnModel(const std::string& name, const std::string& extra) {
  return "  - name: " + name +
         "\n"
         "    path: " +
         kModels +
         "/small_cnn.pt\n"
         "    inputs: [{name: image, datatype: FP32, shape: [-1, 3, 32, 32]}]\n"
         "    outputs: [{name: logits, datatype: FP32, shape: [-1, 10]}]\n"
         "    instances: [{count: 1, threads: 1, batch: 4}]\n"
         "    warmup_iterations: 1\n" +
         extra;
}

std::string Image(int rows) {
  std::string data = "[";
  for (int i = 0; i < rows * 3 * 32 * 32; ++i) {
    if (i) data += ',';
    data += std::to_string(std::sin(i * 0.37));
  }
  return "{\"inputs\":[{\"name\":\"image\",\"datatype\":\"FP32\",\"shape\":[" +
         std::to_string(rows) + ",3,32,32],\"data\":" + data + "]}]}";
}

std::vector<double> Logits(const std::string& body) {
  simdjson::dom::parser parser;
  std::vector<double> out;
  for (simdjson::dom::element v : parser.parse(body)["outputs"].at(0)["data"].get_array()) {
    out.push_back(double(v));
  }
  return out;
}

TEST(OptimizationIntegrationTest, OptimisedFallbackAndStrictModels) {
  AgentProcess agent(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
      "strict_readiness: false}\n"
      "models:\n" +
          CnnModel("plain", "") +
          CnnModel("fast",
                   "    optimize: {precision: bf16, memory_format: channels_last, "
                   "freeze: true, allow_emulated_bf16: true}\n    accuracy: {samples: 4}\n") +
          CnnModel("fallback",
                   "    optimize: {precision: bf16, allow_emulated_bf16: true}\n"
                   "    accuracy: {samples: 4, max_rel_error: 0}\n") +
          CnnModel("strict",
                   "    optimize: {precision: bf16, allow_emulated_bf16: true}\n"
                   "    accuracy: {samples: 4, max_rel_error: 0, strict: true}\n"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient client("127.0.0.1", agent.http_port());
  simdjson::dom::parser parser;

  // The optimised model: settings and guard figures on its metadata; FP32 in and out.
  const std::string fast_meta = client.Get("/v2/models/fast").body;
  simdjson::dom::element meta = parser.parse(fast_meta);
  EXPECT_EQ(std::string_view(meta["parameters"]["kernel"]), "bf16+cl+frozen") << fast_meta;
  EXPECT_EQ(std::string_view(meta["parameters"]["load_report"]["kernel"]), "bf16+cl+frozen");
  EXPECT_EQ(int64_t(meta["parameters"]["load_report"]["checked"]), 1);
  EXPECT_EQ(int64_t(meta["parameters"]["load_report"]["fallback"]), 0);
  EXPECT_LT(double(meta["parameters"]["load_report"]["max_rel_error"]), 0.05);
  const auto plain = client.Post("/v2/models/plain/infer", Image(3));
  const auto fast = client.Post("/v2/models/fast/infer", Image(3));
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(fast.status, 200) << fast.body;
  EXPECT_NE(fast.body.find("\"datatype\":\"FP32\""), std::string::npos);
  const std::vector<double> a = Logits(plain.body), b = Logits(fast.body);
  ASSERT_EQ(a.size(), b.size());
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(a[i]));
  }
  EXPECT_LT(err / scale, 0.05);
  EXPECT_GT(err, 0) << "bf16 really ran";

  // Beyond tolerance: serves FP32, and says so.
  const std::string fallback_meta = client.Get("/v2/models/fallback").body;
  meta = parser.parse(fallback_meta);
  EXPECT_EQ(std::string_view(meta["parameters"]["state"]), "READY");
  EXPECT_EQ(std::string_view(meta["parameters"]["load_report"]["kernel"]), "fp32") << fallback_meta;
  EXPECT_EQ(int64_t(meta["parameters"]["load_report"]["fallback"]), 1);
  const auto fallback = client.Post("/v2/models/fallback/infer", Image(3));
  ASSERT_EQ(fallback.status, 200);
  EXPECT_EQ(Logits(fallback.body), a) << "the FP32 original, exactly";
  EXPECT_TRUE(agent.WaitForLog("serving the FP32 original instead"));

  // Strict: not ready, with the reason.
  const std::string strict_meta = client.Get("/v2/models/strict").body;
  meta = parser.parse(strict_meta);
  EXPECT_EQ(std::string_view(meta["parameters"]["state"]), "FAILED");
  EXPECT_NE(std::string_view(meta["parameters"]["reason"]).find("accuracy.strict"),
            std::string_view::npos)
      << strict_meta;
  EXPECT_EQ(client.Post("/v2/models/strict/infer", Image(1)).status, 503);

  HttpClient metrics("127.0.0.1", agent.metrics_port());
  const std::string page = metrics.Get("/metrics").body;
  EXPECT_NE(page.find("packrat_model_kernel{configured=\"bf16+cl+frozen\","
                      "kernel=\"bf16+cl+frozen\",model=\"fast\"} 1"),
            std::string::npos)
      << page;
  EXPECT_NE(
      page.find("packrat_model_kernel{configured=\"bf16\",kernel=\"fp32\",model=\"fallback\"} 1"),
      std::string::npos);
  EXPECT_NE(page.find("packrat_accuracy_max_rel_error{model=\"fast\"}"), std::string::npos);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

}  // namespace
}  // namespace packrat
