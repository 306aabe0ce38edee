// The model repository against the real agent: index, load, unload and reload over REST, the
// errors of broken folders, CPUs held by one model kept from the next, and loads and unloads
// while other clients keep sending — to that model and to another one.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;
using testing::TempDir;

const std::string kModels = PACKRAT_MODELS_DIR;

// model.yaml of a tiny_mlp model on one single-thread instance (one CPU).
std::string TinyYaml(const std::string& path = kModels + "/tiny_mlp.pt") {
  return "path: " + path +
         "\n"
         "inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
         "outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
         "batching: {max_batch: 4, max_delay_us: 500}\n"
         "instances: [{count: 1, threads: 1, batch: 4}]\n"
         "warmup_iterations: 1\n";
}

std::string TinyBody() {
  std::string data = "[";
  for (int i = 0; i < 16; ++i) data += (i ? ",0.25" : "0.25");
  return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],\"data\":" + data +
         "]}]}";
}

void WriteFolder(const std::string& repo, const std::string& name, const std::string& yaml) {
  std::filesystem::create_directories(repo + "/" + name);
  if (!yaml.empty()) std::ofstream(repo + "/" + name + "/model.yaml") << yaml;
}

std::string Config(const std::string& repo, const std::string& control) {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
         "model_repository: " +
         repo + ", model_control: " + control + "}\n";
}

// The entry of `name` in an index body, e.g. {"name":"a","version":"1","state":"READY"}.
std::string Entry(const std::string& index, const std::string& name) {
  const size_t at = index.find("{\"name\":\"" + name + "\"");
  if (at == std::string::npos) return "";
  return index.substr(at, index.find('}', at) - at + 1);
}

TEST(RepositoryTest, IndexLoadUnloadAndClearErrors) {
  TempDir repo("packrat-repo");
  WriteFolder(repo.path(), "a", TinyYaml());
  WriteFolder(repo.path(), "b", TinyYaml());
  WriteFolder(repo.path(), "c", TinyYaml());
  WriteFolder(repo.path(), "broken", "path: x.pt\ninputs: [{name: x\n");
  WriteFolder(repo.path(), "empty", "");
  WriteFolder(repo.path(), "missing", TinyYaml(repo.path() + "/missing/nothing.pt"));
  AgentProcess agent(PACKRAT_AGENT_PATH, Config(repo.path(), "explicit"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient manage("127.0.0.1", agent.management_port());
  HttpClient http("127.0.0.1", agent.http_port());

  HttpResult index = manage.Post("/v2/repository/index", "");
  ASSERT_EQ(index.status, 200) << index.body;
  for (const char* name : {"a", "b", "c", "broken", "missing"}) {
    EXPECT_NE(Entry(index.body, name).find("\"state\":\"UNAVAILABLE\""), std::string::npos)
        << name << " in " << index.body;
  }
  EXPECT_NE(Entry(index.body, "empty").find("no model.yaml"), std::string::npos) << index.body;
  EXPECT_EQ(manage.Post("/v2/repository/index", "{\"ready\":true}").body, "[]");
  EXPECT_EQ(http.Post("/v2/models/a/infer", TinyBody()).status, 404);

  // Loads: the model serves once the answer comes.
  HttpResult load = manage.Post("/v2/repository/models/a/load", "");
  ASSERT_EQ(load.status, 200) << load.body << agent.Digest();
  EXPECT_EQ(http.Post("/v2/models/a/infer", TinyBody()).status, 200);
  EXPECT_NE(Entry(manage.Post("/v2/repository/index", "").body, "a").find("\"state\":\"READY\""),
            std::string::npos);

  // Broken folders: each a clear error, in the answer and in the index; nothing else changes.
  HttpResult broken = manage.Post("/v2/repository/models/broken/load", "");
  EXPECT_EQ(broken.status, 400) << broken.body;
  EXPECT_NE(broken.body.find("model.yaml:"), std::string::npos) << broken.body;  // file:line
  HttpResult missing = manage.Post("/v2/repository/models/missing/load", "");
  EXPECT_EQ(missing.status, 400) << missing.body;
  EXPECT_NE(missing.body.find("nothing.pt' not found"), std::string::npos) << missing.body;
  EXPECT_EQ(manage.Post("/v2/repository/models/empty/load", "").status, 404);
  EXPECT_EQ(manage.Post("/v2/repository/models/nowhere/load", "").status, 404);
  EXPECT_EQ(manage.Post("/v2/repository/models/..%2F/load", "").status, 400);
  index = manage.Post("/v2/repository/index", "");
  EXPECT_NE(Entry(index.body, "broken").find("model.yaml:"), std::string::npos) << index.body;
  EXPECT_EQ(http.Post("/v2/models/a/infer", TinyBody()).status, 200);

  // CPUs: a and b hold one each of this node's CPUs (the test machines have 2); c waits for
  // one to be freed. On a bigger machine c simply loads.
  ASSERT_EQ(manage.Post("/v2/repository/models/b/load", "").status, 200) << agent.Digest();
  HttpResult c = manage.Post("/v2/repository/models/c/load", "");
  if (std::thread::hardware_concurrency() == 2) {
    EXPECT_EQ(c.status, 429) << c.body;
    EXPECT_NE(c.body.find("needs 1 CPU(s) and 0 are free"), std::string::npos) << c.body;
    EXPECT_EQ(http.Post("/v2/models/c/infer", TinyBody()).status, 404);
  }

  // Unload: gone from inference, the index and the metrics; its CPU is free again.
  ASSERT_EQ(manage.Post("/v2/repository/models/a/unload", "").status, 200) << agent.Digest();
  EXPECT_EQ(http.Post("/v2/models/a/infer", TinyBody()).status, 404);
  EXPECT_NE(
      Entry(manage.Post("/v2/repository/index", "").body, "a").find("\"reason\":\"unloaded\""),
      std::string::npos);
  HttpClient metrics("127.0.0.1", agent.metrics_port());
  const std::string page = metrics.Get("/metrics").body;
  EXPECT_EQ(page.find("model=\"a\""), std::string::npos);
  EXPECT_NE(page.find("model=\"b\""), std::string::npos);
  EXPECT_EQ(manage.Post("/v2/repository/models/a/unload", "").status, 404);
  ASSERT_EQ(manage.Post("/v2/repository/models/c/load", "").status, 200) << agent.Digest();
  EXPECT_EQ(http.Post("/v2/models/c/infer", TinyBody()).status, 200);
  EXPECT_EQ(http.Post("/v2/models/b/infer", TinyBody()).status, 200);

  EXPECT_EQ(agent.Stop(SIGTERM), 0);
}

// Readiness is honest: while the repository's models load at start, the server is not ready
// and a model still loading answers 503 (never 404: it is known); once every model is ready,
// so is the server. A model that failed at start keeps a strict server not ready (it served
// ready in 94 of 95 samples taken before the model was, and the model 404).
TEST(RepositoryTest, TheServerIsReadyOnlyOnceTheModelsAskedForAtStartAre) {
  TempDir repo("packrat-repo");
  std::ofstream(repo.path() + "/slow.csv") << "threads,batch,latency_ms\n1,1,5\n1,4,10\n";
  WriteFolder(repo.path(), "slow",
              "emulate: {profile: " + repo.path() +
                  "/slow.csv, load_s: 3}\n"
                  "inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
                  "outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
                  "instances: [{count: 1, threads: 1, batch: 4}]\n");
  AgentProcess agent(PACKRAT_AGENT_PATH, Config(repo.path(), "all"));
  // The listeners serve before the loader thread is done: ports.json is written by then.
  ASSERT_TRUE(agent.WaitForLog("listening:")) << agent.Digest();
  std::ifstream ports(agent.dir() + "/ports.json");
  std::string text((std::istreambuf_iterator<char>(ports)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"http\":");
  ASSERT_NE(at, std::string::npos) << text;
  HttpClient http("127.0.0.1", static_cast<uint16_t>(std::stoi(text.substr(at + 7))));
  int early = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    // The server first: once it says ready, the model must be.
    const int server = http.Get("/v2/health/ready").status;
    const int model = http.Get("/v2/models/slow/ready").status;
    ASSERT_NE(model, 404) << "a model loading at start is known";
    if (server == 200) {
      EXPECT_EQ(model, 200) << "ready while a model loads";
      break;
    }
    EXPECT_EQ(server, 400);  // KServe v2: 4xx, not ready
    if (model != 200) {
      EXPECT_EQ(model, 503);
    }
    ++early;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << agent.Digest();
  }
  EXPECT_GT(early, 0);
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  EXPECT_EQ(http.Get("/v2/health/ready").status, 200);
}

// Clients keep sending to both models while `a` is reloaded and then unloaded: `b` answers
// every request; `a` answers every request during the reload (no downtime), and during the
// unload each request is either answered or refused cleanly — 503 while the model unloads,
// 404 once it is gone — and none hangs or fails otherwise.
TEST(RepositoryTest, ReloadAndUnloadUnderLoad) {
  TempDir repo("packrat-repo");
  WriteFolder(repo.path(), "a", TinyYaml());
  WriteFolder(repo.path(), "b", TinyYaml());
  AgentProcess agent(PACKRAT_AGENT_PATH, Config(repo.path(), "all"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient manage("127.0.0.1", agent.management_port());
  const std::string ready = manage.Post("/v2/repository/index", "{\"ready\":true}").body;
  ASSERT_EQ(Entry(ready, "a"), "{\"name\":\"a\",\"version\":\"1\",\"state\":\"READY\"}") << ready;
  ASSERT_EQ(Entry(ready, "b"), "{\"name\":\"b\",\"version\":\"1\",\"state\":\"READY\"}") << ready;

  std::atomic<bool> stop{false};
  std::atomic<bool> unloading{false};
  std::map<std::string, std::map<int, int>> codes;  // model -> status -> count
  std::mutex codes_mu;
  std::vector<std::thread> clients;
  for (const std::string model : {"a", "a", "b"}) {
    clients.emplace_back([&, model] {
      HttpClient http("127.0.0.1", agent.http_port());
      std::map<int, int> mine;
      while (!stop.load()) {
        const HttpResult r = http.Post("/v2/models/" + model + "/infer", TinyBody());
        const int status = r.status;
        if (status != 200 && status != 404 && status != 503) {
          ADD_FAILURE() << model << ": " << status << " " << r.body;
        }
        // Before the unload begins, every answer of `a` must be a 200.
        ++mine[status != 200 && !unloading.load() ? -status : status];
      }
      std::lock_guard<std::mutex> lock(codes_mu);
      for (const auto& [status, n] : mine) codes[model][status] += n;
    });
  }
  const auto before = agent.RuntimePids();
  HttpResult reload = manage.Post("/v2/repository/models/a/load", "");
  ASSERT_EQ(reload.status, 200) << reload.body << agent.Digest();
  EXPECT_GT(agent.RuntimePids().size(), before.size());  // a's new version started its own
  unloading = true;
  ASSERT_EQ(manage.Post("/v2/repository/models/a/unload", "").status, 200) << agent.Digest();
  stop = true;
  for (std::thread& t : clients) t.join();

  for (const auto& [model, counts] : codes) {
    for (const auto& [status, n] : counts) {
      if (model == "a" && (status == 404 || status == 503)) continue;  // after the unload began
      EXPECT_EQ(status, 200) << n << " request(s) of " << model << " got " << status;
    }
  }
  EXPECT_GT(codes["a"][200], 0);
  EXPECT_GT(codes["b"][200], 0);
  EXPECT_EQ(agent.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace packrat
