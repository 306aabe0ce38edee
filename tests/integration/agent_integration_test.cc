// End-to-end tests of the real agent: packrat-agent and packrat-runtime processes, shared
// memory and HTTP, checked against direct in-process libtorch (ModelRunner) on the same inputs.
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
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

// The two_head model's entry in `models:`, its ids input of `ids_shape`.
std::string TwoHeadModel(const std::string& ids_shape, const std::string& batching,
                         const std::string& instances) {
  return "  - name: two_head\n"
         "    path: " +
         kModels +
         "/two_head.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 8]},\n"
         "             {name: ids, datatype: INT64, shape: " +
         ids_shape +
         "}]\n"
         "    outputs: [{name: scores, datatype: FP32, shape: [-1, 5]},\n"
         "              {name: best, datatype: INT64, shape: [-1]}]\n"
         "    batching: " +
         batching + "\n    instances: " + instances + "\n    warmup_iterations: 1\n";
}

std::string TwoModelConfig(const std::string& extra_server = "") {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
         "max_body_bytes: 1048576" +
         extra_server + "}\n" + "models:\n" +
         TwoHeadModel("[-1, 4]", "{max_batch: 8, max_delay_us: 1000}",
                      "[{count: 1, threads: 1, batch: 4}, {count: 1, threads: 1, batch: 2}]") +
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

// One request's inputs, kept to compute the expected outputs.
struct Sample {
  std::string model;
  int64_t rows = 0;
  std::vector<float> floats;  // x or image
  std::vector<int64_t> ids;   // two_head only
  int64_t ids_per_row = 4;    // two_head: the ids input's second dim
};

Sample MakeSample(const std::string& model, int64_t rows, std::mt19937& rng,
                  int64_t ids_per_row = 4) {
  Sample s;
  s.model = model;
  s.rows = rows;
  s.ids_per_row = ids_per_row;
  std::normal_distribution<float> normal;
  const int64_t per_row = model == "cnn" ? 3 * 32 * 32 : 8;
  s.floats.resize(rows * per_row);
  for (float& f : s.floats) f = normal(rng);
  if (model == "two_head") {
    std::uniform_int_distribution<int64_t> id(0, 99);
    s.ids.resize(rows * ids_per_row);
    for (int64_t& v : s.ids) v = id(rng);
  }
  return s;
}

template <typename T>
std::string JsonArray(const std::vector<T>& values) {
  std::string out = "[";
  char buf[64];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    const auto r = std::to_chars(buf, buf + sizeof(buf), values[i]);
    out.append(buf, r.ptr);
  }
  return out + "]";
}

std::string Shape(int64_t rows, const std::vector<int64_t>& rest) {
  std::vector<int64_t> s{rows};
  s.insert(s.end(), rest.begin(), rest.end());
  return JsonArray(s);
}

// Builds the request body: JSON tensors or the binary extension (then also binary outputs).
std::pair<std::string, std::map<std::string, std::string>> EncodeRequest(const Sample& s,
                                                                         bool binary) {
  std::map<std::string, std::string> headers;
  const bool cnn = s.model == "cnn";
  const std::string fname = cnn ? "image" : "x";
  const std::vector<int64_t> frest =
      cnn ? std::vector<int64_t>{3, 32, 32} : std::vector<int64_t>{8};
  std::string json = "{\"id\":\"r\",\"inputs\":[";
  std::string tail;
  json += "{\"name\":\"" + fname + "\",\"datatype\":\"FP32\",\"shape\":" + Shape(s.rows, frest);
  if (binary) {
    json += ",\"parameters\":{\"binary_data_size\":" + std::to_string(s.floats.size() * 4) + "}}";
    tail.append(reinterpret_cast<const char*>(s.floats.data()), s.floats.size() * 4);
  } else {
    json += ",\"data\":" + JsonArray(s.floats) + "}";
  }
  if (!cnn) {
    json += ",{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":" + Shape(s.rows, {s.ids_per_row});
    if (binary) {
      json += ",\"parameters\":{\"binary_data_size\":" + std::to_string(s.ids.size() * 8) + "}}";
      tail.append(reinterpret_cast<const char*>(s.ids.data()), s.ids.size() * 8);
    } else {
      json += ",\"data\":" + JsonArray(s.ids) + "}";
    }
  }
  json += "]";
  if (binary) json += ",\"parameters\":{\"binary_data_output\":true}";
  json += "}";
  if (binary) {
    headers["Inference-Header-Content-Length"] = std::to_string(json.size());
    headers["Content-Type"] = "application/octet-stream";
  }
  return {json + tail, headers};
}

struct Output {
  std::string datatype;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// Parses a 200 response (JSON or binary extension) into outputs by name.
std::map<std::string, Output> ParseResponse(const HttpResult& r) {
  std::map<std::string, Output> outputs;
  size_t json_len = r.body.size();
  if (auto it = r.headers.find("inference-header-content-length"); it != r.headers.end()) {
    json_len = std::stoul(it->second);
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r.body.data(), json_len);
  size_t binary_offset = json_len;
  for (simdjson::dom::element o : doc["outputs"].get_array()) {
    Output out;
    out.datatype = std::string(std::string_view(o["datatype"]));
    for (int64_t d : o["shape"].get_array()) out.shape.push_back(d);
    const std::string name{std::string_view(o["name"])};
    simdjson::dom::element data;
    if (o["data"].get(data) == simdjson::SUCCESS) {
      for (simdjson::dom::element v : data.get_array()) {
        out.values.push_back(v.is_int64() ? static_cast<double>(int64_t(v)) : double(v));
      }
    } else {
      const uint64_t size = o["parameters"]["binary_data_size"];
      const char* p = r.body.data() + binary_offset;
      if (out.datatype == "FP32") {
        for (size_t i = 0; i < size / 4; ++i) {
          float f;
          std::memcpy(&f, p + 4 * i, 4);
          out.values.push_back(f);
        }
      } else {
        for (size_t i = 0; i < size / 8; ++i) {
          int64_t v;
          std::memcpy(&v, p + 8 * i, 8);
          out.values.push_back(static_cast<double>(v));
        }
      }
      binary_offset += size;
    }
    outputs[name] = std::move(out);
  }
  return outputs;
}

// Direct libtorch on the same inputs: the ground truth.
class Reference {
 public:
  Reference() {
    for (const char* name : {"two_head", "cnn"}) {
      runtime::ModelRunnerOptions o;
      o.model_path = kModels + (std::string(name) == "cnn" ? "/small_cnn.pt" : "/two_head.pt");
      o.threads = 1;
      auto r = runtime::ModelRunner::Create(o);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      runners_[name] = std::move(r).value();
    }
  }

  std::vector<std::vector<double>> Run(Sample s) {
    std::vector<runtime::RawTensor> in;
    const bool cnn = s.model == "cnn";
    runtime::RawTensor f;
    f.datatype = DataType::kFp32;
    f.shape = cnn ? std::vector<int64_t>{s.rows, 3, 32, 32} : std::vector<int64_t>{s.rows, 8};
    f.data = s.floats.data();
    f.byte_size = s.floats.size() * 4;
    in.push_back(f);
    if (!cnn) {
      runtime::RawTensor ids;
      ids.datatype = DataType::kInt64;
      ids.shape = {s.rows, s.ids_per_row};
      ids.data = s.ids.data();
      ids.byte_size = s.ids.size() * 8;
      in.push_back(ids);
    }
    std::vector<uint8_t> buffer(1 << 20);
    std::vector<runtime::RawTensor> out;
    Status st = runners_[s.model]->Run(in, buffer.data(), buffer.size(), &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::vector<std::vector<double>> result;
    for (const auto& t : out) {
      std::vector<double> v;
      if (t.datatype == DataType::kFp32) {
        const float* p = static_cast<const float*>(t.data);
        v.assign(p, p + t.byte_size / 4);
      } else {
        const int64_t* p = static_cast<const int64_t*>(t.data);
        for (size_t i = 0; i < t.byte_size / 8; ++i) v.push_back(static_cast<double>(p[i]));
      }
      result.push_back(std::move(v));
    }
    return result;
  }

 private:
  std::map<std::string, std::unique_ptr<runtime::ModelRunner>> runners_;
};

class AgentIntegrationTest : public ::testing::Test {
 protected:
  void StartAgent(const std::string& config) {
    agent_ = std::make_unique<AgentProcess>(PACKRAT_AGENT_PATH, config);
    ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  }

  // SIGTERM; the agent must exit 0 and leave no runtime process and no segment behind.
  void StopAgentAndCheckClean() {
    const pid_t pid = agent_->pid();
    const std::vector<pid_t> runtimes = agent_->RuntimePids();
    const auto status = agent_->Stop(SIGTERM);
    ASSERT_TRUE(status.has_value()) << "agent did not exit\n" << agent_->Digest();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent_->Digest();
    for (pid_t r : runtimes) EXPECT_FALSE(testing::ProcessExists(r)) << "runtime " << r;
    EXPECT_TRUE(testing::SegmentsOf(pid).empty());
  }

  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentIntegrationTest, ConcurrentRequestsMatchDirectLibtorch) {
  StartAgent(TwoModelConfig());
  ASSERT_EQ(agent_->RuntimePids().size(), 4u);

  constexpr int kThreads = 16;
  constexpr int kRequests = 200;
  std::vector<Sample> samples;
  std::vector<bool> binary;
  std::mt19937 rng(42);
  for (int i = 0; i < kRequests; ++i) {
    const std::string model = i % 3 == 0 ? "cnn" : "two_head";
    samples.push_back(MakeSample(model, std::uniform_int_distribution<int64_t>(1, 6)(rng), rng));
    binary.push_back(i % 2 == 1);
  }
  std::vector<HttpResult> results(kRequests);
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&] {
      HttpClient client("127.0.0.1", agent_->http_port());
      for (int i; (i = next.fetch_add(1)) < kRequests;) {
        auto [body, headers] = EncodeRequest(samples[i], binary[i]);
        results[i] = client.Post("/v2/models/" + samples[i].model + "/infer", body, headers);
      }
    });
  }
  for (auto& c : clients) c.join();

  Reference reference;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(results[i].status, 200) << i << ": " << results[i].body << results[i].error;
    auto outputs = ParseResponse(results[i]);
    const auto expected = reference.Run(samples[i]);
    const std::vector<std::string> names = samples[i].model == "cnn"
                                               ? std::vector<std::string>{"logits"}
                                               : std::vector<std::string>{"scores", "best"};
    ASSERT_EQ(expected.size(), names.size());
    for (size_t k = 0; k < names.size(); ++k) {
      const Output& got = outputs[names[k]];
      ASSERT_EQ(got.shape[0], samples[i].rows);
      ASSERT_EQ(got.values.size(), expected[k].size()) << names[k];
      double max_diff = 0;
      for (size_t e = 0; e < got.values.size(); ++e) {
        max_diff = std::max(max_diff, std::abs(got.values[e] - expected[k][e]));
      }
      EXPECT_LE(max_diff, 1e-5) << "request " << i << " output " << names[k];
    }
  }
  // The statistics extension counts what was served, per model.
  HttpClient client("127.0.0.1", agent_->http_port());
  for (const std::string model : {"cnn", "two_head"}) {
    SCOPED_TRACE(model);
    uint64_t requests = 0, rows = 0;
    for (const Sample& sample : samples) {
      if (sample.model != model) continue;
      ++requests;
      rows += static_cast<uint64_t>(sample.rows);
    }
    const HttpResult stats = client.Get("/v2/models/" + model + "/stats");
    ASSERT_EQ(stats.status, 200) << stats.body;
    simdjson::dom::parser parser;
    const simdjson::dom::element m = parser.parse(stats.body)["model_stats"].at(0);
    EXPECT_EQ(std::string_view(m["name"]), model);
    EXPECT_EQ(std::string_view(m["version"]), "1");
    EXPECT_GT(uint64_t(m["last_inference"]), 1'700'000'000'000u);  // ms since the epoch
    EXPECT_EQ(uint64_t(m["inference_count"]), rows);
    const uint64_t executions = m["execution_count"];
    EXPECT_GE(executions, 1u);
    EXPECT_LE(executions, rows);
    const simdjson::dom::element is = m["inference_stats"];
    EXPECT_EQ(uint64_t(is["success"]["count"]), requests);
    EXPECT_GT(uint64_t(is["success"]["ns"]), 0u);
    EXPECT_EQ(uint64_t(is["fail"]["count"]), 0u);
    EXPECT_EQ(uint64_t(is["queue"]["count"]), requests);
    for (const char* part : {"compute_input", "compute_infer", "compute_output"}) {
      EXPECT_GE(uint64_t(is[part]["count"]), requests) << part;  // a request per slice it is in
      EXPECT_GT(uint64_t(is[part]["ns"]), 0u) << part;
    }
    uint64_t batch_executions = 0, batch_rows = 0;
    for (const simdjson::dom::element b : m["batch_stats"].get_array()) {
      const uint64_t count = b["compute_infer"]["count"];
      batch_executions += count;
      batch_rows += count * uint64_t(b["batch_size"]);
    }
    EXPECT_EQ(batch_executions, executions);
    EXPECT_EQ(batch_rows, rows);
  }
  StopAgentAndCheckClean();
}

TEST_F(AgentIntegrationTest, MetadataAndHealthRoutes) {
  StartAgent(TwoModelConfig());
  HttpClient client("127.0.0.1", agent_->http_port());
  EXPECT_EQ(client.Get("/v2/health/live").status, 200);
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(client.Get("/v2/models/cnn/ready").status, 200);
  EXPECT_EQ(client.Get("/v2/models/cnn/versions/1/ready").status, 200);
  const HttpResult server = client.Get("/v2");
  EXPECT_EQ(server.status, 200);
  EXPECT_NE(server.body.find("\"name\":\"packrat\""), std::string::npos);
  const HttpResult meta = client.Get("/v2/models/two_head");
  EXPECT_EQ(meta.status, 200);
  EXPECT_NE(meta.body.find("{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[-1,4]}"),
            std::string::npos)
      << meta.body;
  const HttpResult missing = client.Get("/v2/models/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "{\"error\":\"unknown model 'nope'\"}");
  EXPECT_EQ(client.Get("/v2/models/cnn/versions/7").status, 404);
  EXPECT_EQ(client.Get("/v2/models/cnn/infer").status, 405);
  EXPECT_EQ(client.Get("/nothing").status, 404);
  // The statistics and logging extensions (Triton's).
  EXPECT_NE(server.body.find("\"statistics\""), std::string::npos) << server.body;
  EXPECT_NE(server.body.find("\"logging\""), std::string::npos) << server.body;
  const HttpResult all = client.Get("/v2/models/stats");
  EXPECT_EQ(all.status, 200);
  EXPECT_NE(all.body.find("{\"name\":\"cnn\",\"version\":\"1\","), std::string::npos) << all.body;
  EXPECT_NE(all.body.find("{\"name\":\"two_head\","), std::string::npos) << all.body;
  EXPECT_EQ(client.Get("/v2/models/cnn/versions/1/stats").status, 200);
  EXPECT_EQ(client.Get("/v2/models/nope/stats").status, 404);
  EXPECT_EQ(client.Post("/v2/models/cnn/stats", "{}").status, 405);
  const std::string quiet =
      "{\"log_file\":\"\",\"log_info\":false,\"log_warning\":true,\"log_error\":true,"
      "\"log_verbose_level\":0,\"log_format\":\"text\"}";
  const HttpResult changed =
      client.Post("/v2/logging", R"({"log_info": false, "log_verbose_level": 0})");
  EXPECT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(changed.body, quiet);
  EXPECT_EQ(client.Get("/v2/logging").body, quiet);
  const HttpResult refused = client.Post("/v2/logging", R"({"log_info": true, "log_file": "/x"})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("\"error\":\"log setting 'log_file'"), std::string::npos)
      << refused.body;
  EXPECT_EQ(client.Get("/v2/logging").body, quiet);  // nothing of a refused change applies
  EXPECT_EQ(client.Post("/v2/logging", R"({"log_info": true})").status, 200);
  // The management address serves the same health routes.
  HttpClient management("127.0.0.1", agent_->management_port());
  EXPECT_EQ(management.Get("/v2/health/ready").status, 200);
  StopAgentAndCheckClean();
}

TEST_F(AgentIntegrationTest, BadInputIsRejectedWhileGoodRequestsSucceed) {
  StartAgent(TwoModelConfig());
  std::atomic<bool> stop{false};
  std::atomic<int> good_ok{0}, good_failed{0};
  std::vector<std::thread> good;
  for (int t = 0; t < 4; ++t) {
    good.emplace_back([&, t] {
      HttpClient client("127.0.0.1", agent_->http_port());
      std::mt19937 rng(t);
      while (!stop.load() || good_ok.load() + good_failed.load() < 40) {
        const Sample s = MakeSample(t % 2 ? "cnn" : "two_head", 1 + t, rng);
        auto [body, headers] = EncodeRequest(s, t % 2 == 0);
        const HttpResult r = client.Post("/v2/models/" + s.model + "/infer", body, headers);
        (r.status == 200 ? good_ok : good_failed).fetch_add(1);
      }
    });
  }

  HttpClient client("127.0.0.1", agent_->http_port());
  auto expect_error = [&](const HttpResult& r, int status, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    EXPECT_EQ(r.body.rfind("{\"error\":\"", 0), 0u) << what << ": " << r.body;
    const auto type = r.headers.find("content-type");
    EXPECT_EQ(type == r.headers.end() ? "" : type->second, "application/json") << what;
  };
  expect_error(client.Post("/v2/models/cnn/infer", "{\"inputs\": [ {"), 400, "malformed JSON");
  expect_error(client.Post("/v2/models/nope/infer", "{}"), 404, "unknown model");
  expect_error(client.Post("/v2/models/two_head/infer",
                           R"({"inputs":[{"name":"x","shape":[1,8],"datatype":"INT32",)"
                           R"("data":[1,2,3,4,5,6,7,8]},{"name":"ids","shape":[1,4],)"
                           R"("datatype":"INT64","data":[1,2,3,4]}]})"),
               400, "wrong datatype");
  expect_error(client.Post("/v2/models/two_head/infer",
                           R"({"inputs":[{"name":"x","shape":[1,7],"datatype":"FP32",)"
                           R"("data":[1,2,3,4,5,6,7]},{"name":"ids","shape":[1,4],)"
                           R"("datatype":"INT64","data":[1,2,3,4]}]})"),
               400, "wrong shape");
  expect_error(client.Post("/v2/models/two_head/infer",
                           R"({"inputs":[{"name":"x","shape":[1,8],"datatype":"FP32",)"
                           R"("data":[1,2,3]},{"name":"ids","shape":[1,4],)"
                           R"("datatype":"INT64","data":[1,2,3,4]}]})"),
               400, "element count");
  expect_error(client.Post("/v2/models/cnn/infer",
                           R"({"inputs":[{"name":"image","shape":[9,3,32,32],"datatype":"FP32",)"
                           R"("parameters":{"binary_data_size":16}}]})"
                           "0123456789abcdef",
                           {{"Inference-Header-Content-Length", "93"}}),
               400, "binary size mismatch");
  expect_error(client.Post("/v2/models/cnn/infer", std::string(2 << 20, ' ')), 413,
               "body over the limit");

  stop.store(true);
  for (auto& g : good) g.join();
  EXPECT_GE(good_ok.load(), 40);
  EXPECT_EQ(good_failed.load(), 0);
  StopAgentAndCheckClean();
}

// A model whose ids input varies in length ([-1, -1]) with 4 KiB of slab room for it: batches
// whose rows do not fit together run in slices that do (before, such a batch was a 429), and a
// request with one row too large for any slab is a 413 at once (retrying cannot help), while
// the others are served right.
TEST_F(AgentIntegrationTest, VariableSizedRowsRunInSlicesThatFitAndARowTooLargeIs413) {
  StartAgent(
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
      "models:\n" +
      TwoHeadModel("[-1, -1]", "{max_batch: 16, max_delay_us: 5000, variable_tensor_bytes: 4096}",
                   "[{count: 1, threads: 1, batch: 8}]"));
  // 200 ids a row: 1,632 bytes with x's, four rows to a slice at most (the runtime's slab is
  // the 4 KiB room plus x's, rounded up to whole pages: 8 KiB); 500 ids: one row fits.
  std::mt19937 rng(7);
  std::vector<Sample> samples;
  for (int i = 0; i < 24; ++i) {
    const int64_t per_row = i % 6 == 5 ? 500 : i % 2 ? 200 : 40;
    samples.push_back(MakeSample("two_head", per_row == 500 ? 1 : 1 + i % 8, rng, per_row));
  }
  std::vector<HttpResult> results(samples.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      HttpClient client("127.0.0.1", agent_->http_port());
      for (size_t i; (i = next.fetch_add(1)) < samples.size();) {
        auto [body, headers] = EncodeRequest(samples[i], i % 2 == 1);
        results[i] = client.Post("/v2/models/two_head/infer", body, headers);
      }
    });
  }
  HttpClient client("127.0.0.1", agent_->http_port());
  const Sample huge = MakeSample("two_head", 2, rng, 600);  // 4,832 bytes a row
  const HttpResult refused =
      client.Post("/v2/models/two_head/infer", EncodeRequest(huge, false).first);
  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_EQ(refused.body.rfind("{\"error\":\"one row of the inputs takes 4832 bytes ('x' 32, 'ids' "
                               "4800); a slice of model 'two_head' carries at most 4096 bytes",
                               0),
            0u)
      << refused.body;
  for (auto& c : clients) c.join();

  Reference reference;
  for (size_t i = 0; i < samples.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + ": " + std::to_string(samples[i].rows) +
                 " row(s) of " + std::to_string(samples[i].ids_per_row) + " ids");
    ASSERT_EQ(results[i].status, 200) << results[i].body << results[i].error;
    auto outputs = ParseResponse(results[i]);
    const auto expected = reference.Run(samples[i]);
    ASSERT_EQ(expected.size(), 2u);
    const std::vector<std::string> names{"scores", "best"};
    for (size_t k = 0; k < names.size(); ++k) {
      const Output& got = outputs[names[k]];
      ASSERT_EQ(got.values.size(), expected[k].size()) << names[k];
      for (size_t e = 0; e < got.values.size(); ++e) {
        EXPECT_NEAR(got.values[e], expected[k][e], 1e-5) << names[k] << "[" << e << "]";
      }
    }
  }
  EXPECT_EQ(client.Post("/v2/models/two_head/infer", EncodeRequest(samples[1], false).first).status,
            200);
  StopAgentAndCheckClean();
}

// Lenient readiness (strict readiness ends the agent instead: HardeningTest).
TEST_F(AgentIntegrationTest, ModelThatFailsToLoadIsNotReadyAndOthersServe) {
  StartAgent(TwoModelConfig(", strict_readiness: false") +
             "  - name: broken\n"
             "    path: " +
             kModels +
             "/not_a_model.pt\n"
             "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
             "    outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]\n"
             "    instances: [{count: 1, threads: 1, batch: 1}]\n");
  HttpClient client("127.0.0.1", agent_->http_port());
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(client.Get("/v2/models/broken/ready").status, 400);
  const HttpResult meta = client.Get("/v2/models/broken");
  EXPECT_NE(meta.body.find("\"state\":\"FAILED\""), std::string::npos) << meta.body;
  EXPECT_NE(meta.body.find("cannot load TorchScript model"), std::string::npos) << meta.body;
  EXPECT_EQ(client.Post("/v2/models/broken/infer", "{}").status, 503);
  std::mt19937 rng(1);
  auto [body, headers] = EncodeRequest(MakeSample("cnn", 2, rng), false);
  EXPECT_EQ(client.Post("/v2/models/cnn/infer", body, headers).status, 200);
  StopAgentAndCheckClean();
}

// server.log_format: json — the agent's lines and its runtimes' alike, each one JSON object
// with an RFC 3339 time that carries the date.
TEST_F(AgentIntegrationTest, JsonLogsAreOneObjectALineWithADateFromAgentAndRuntimes) {
  StartAgent(TwoModelConfig(", log_format: json"));
  HttpClient client("127.0.0.1", agent_->http_port());
  std::mt19937 rng(1);
  auto [body, headers] = EncodeRequest(MakeSample("cnn", 2, rng), false);
  EXPECT_EQ(client.Post("/v2/models/cnn/infer", body, headers).status, 200);
  StopAgentAndCheckClean();
  std::stringstream log(agent_->Log());
  simdjson::dom::parser parser;
  const std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");
  std::set<std::string> components;
  int lines = 0;
  for (std::string line; std::getline(log, line); ++lines) {
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS) << line;
    std::string_view time, component;
    ASSERT_EQ(doc["time"].get(time), simdjson::SUCCESS) << line;
    EXPECT_TRUE(std::regex_match(std::string(time), rfc3339)) << line;
    ASSERT_EQ(doc["component"].get(component), simdjson::SUCCESS) << line;
    components.insert(std::string(component.substr(0, component.find('['))));
  }
  EXPECT_GT(lines, 10);
  EXPECT_TRUE(components.count("agent")) << lines;
  EXPECT_TRUE(components.count("runtime")) << "the runtimes inherit the format";
}

TEST_F(AgentIntegrationTest, ShutdownAnswersQueuedRequests) {
  // A batch of 8 rows that would wait 30 s for more: SIGTERM must dispatch and answer it.
  std::string config = TwoModelConfig();
  const std::string from =
      "    batching: {max_batch: 8, max_delay_us: 1000}\n"
      "    instances: [{count: 2";
  config.replace(config.find(from), from.size(),
                 "    batching: {max_batch: 8, max_delay_us: 30000000}\n"
                 "    instances: [{count: 2");
  StartAgent(config);
  constexpr int kClients = 3;  // 3 rows < B = 8
  std::vector<int> statuses(kClients, 0);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpClient client("127.0.0.1", agent_->http_port());
      std::mt19937 rng(t);
      auto [body, headers] = EncodeRequest(MakeSample("cnn", 1, rng), t % 2 == 0);
      statuses[t] = client.Post("/v2/models/cnn/infer", body, headers).status;
    });
  }
  ASSERT_TRUE(agent_->WaitForLogCount("for model 'cnn'", kClients)) << agent_->Digest();
  StopAgentAndCheckClean();
  for (auto& c : clients) c.join();
  for (int s : statuses) EXPECT_EQ(s, 200) << agent_->Digest();
}

TEST_F(AgentIntegrationTest, ShutdownTurnsReadinessOffAndKeepsServingDuringTheDrainDelay) {
  // Long enough for the checks below on a busy 2-core CI machine (3 s was seen to run out).
  StartAgent(TwoModelConfig(", drain_delay_s: 10"));
  HttpClient client("127.0.0.1", agent_->http_port());  // opened before SIGTERM: keep-alive
  ASSERT_EQ(client.Get("/v2/health/ready").status, 200);
  const pid_t pid = agent_->pid();
  kill(pid, SIGTERM);
  ASSERT_TRUE(agent_->WaitForLog("not ready from now on")) << agent_->Digest();
  EXPECT_EQ(client.Get("/v2/health/ready").status, 400);
  EXPECT_EQ(client.Get("/v2/models/cnn/ready").status, 400);
  EXPECT_EQ(client.Get("/v2/health/live").status, 200);
  std::mt19937 rng(5);
  auto [body, headers] = EncodeRequest(MakeSample("cnn", 2, rng), true);
  EXPECT_EQ(client.Post("/v2/models/cnn/infer", body, headers).status, 200);
  StopAgentAndCheckClean();
}

}  // namespace
}  // namespace packrat
