// A real packrat-agent on a virtual node of 16 CPUs (server.virtual_cpus) with emulated models:
// real processes (packrat-emulated-runtime), real shared memory, real HTTP; no libtorch.
#include <poll.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/pool/cpu_list.h"
#include "gtest/gtest.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;

// L[t,b] in ms. The optimizer's plan for T = 16, B = 16 is 16 × ⟨t=1,b=1⟩ (100 ms).
constexpr char kProfile[] =
    "threads,batch,latency_ms\n"
    "1,1,100\n1,2,190\n1,4,370\n"
    "2,1,60\n2,2,110\n2,4,200\n"
    "4,1,40\n4,2,70\n4,4,300\n";

std::string Model(const std::string& name, const std::string& profile, const std::string& batching,
                  const std::string& instances, const std::string& extra = "",
                  int warmup_iterations = 1) {
  return "  - name: " + name + "\n    emulate: {profile: " + profile +
         ", load_s: 0.2}\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 3]},\n"
         "              {name: z, datatype: INT64, shape: [-1, 2, 2]}]\n"
         "    batching: " +
         batching + "\n    instances: " + instances +
         "\n    warmup_iterations: " + std::to_string(warmup_iterations) + "\n" + extra;
}

class VirtualNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profile_ = dir_.path() + "/profile.csv";
    std::ofstream(profile_) << kProfile;
  }

  void StartAgent(const std::string& models) {
    agent_ = std::make_unique<AgentProcess>(
        PACKRAT_AGENT_PATH,
        "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
        "virtual_cpus: 16}\nmodels:\n" +
            models);
    ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  }

  std::string TwoModels() {
    return Model("auto", profile_, "{max_batch: 16, max_delay_us: 1000}", "auto") +
           Model("fixed", profile_, "{max_batch: 4, max_delay_us: 0}",
                 "[{count: 1, threads: 4, batch: 4}]");
  }

  // A request of `rows` rows of x.
  static std::string Body(int rows) {
    std::string data;
    for (int i = 0; i < rows * 4; ++i) {
      if (i > 0) data += ',';
      data += std::to_string(i);
    }
    return R"({"inputs":[{"name":"x","datatype":"FP32","shape":[)" + std::to_string(rows) +
           R"(,4],"data":[)" + data + "]}]}";
  }

  testing::TempDir dir_{"virtual-node-test"};
  std::string profile_;
  std::unique_ptr<AgentProcess> agent_;
};

// Every element of output `name` of `response`, and its shape.
void ReadOutput(const std::string& response, const std::string& name, std::vector<int64_t>* shape,
                std::vector<double>* data) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(response);
  for (simdjson::dom::element out : doc["outputs"].get_array()) {
    if (std::string(std::string_view(out["name"])) != name) continue;
    for (simdjson::dom::element d : out["shape"].get_array()) shape->push_back(int64_t(d));
    for (simdjson::dom::element v : out["data"].get_array()) {
      data->push_back(v.is_int64() ? static_cast<double>(int64_t(v)) : double(v));
    }
  }
}

TEST_F(VirtualNodeTest, ServesZeroFilledOutputsFromRuntimesOnVirtualCpus) {
  StartAgent(TwoModels());
  HttpClient http("127.0.0.1", agent_->http_port());
  HttpResult r = http.Post("/v2/models/auto/infer", Body(3));
  ASSERT_EQ(r.status, 200) << r.body << agent_->Digest();
  std::vector<int64_t> shape;
  std::vector<double> data;
  ReadOutput(r.body, "y", &shape, &data);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(data, std::vector<double>(9, 0.0));
  shape.clear();
  data.clear();
  ReadOutput(r.body, "z", &shape, &data);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(data, std::vector<double>(12, 0.0));

  // The plan is the optimizer's on the emulated profile, over the 16 virtual CPUs.
  HttpClient management("127.0.0.1", agent_->management_port());
  HttpResult config = management.Get("/v2/models/auto/config");
  ASSERT_EQ(config.status, 200) << config.body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(config.body);
  std::set<std::string> cpus;
  int workers = 0;
  for (simdjson::dom::element w : doc["workers"].get_array()) {
    cpus.insert(std::string(std::string_view(w["cpus"])));
    EXPECT_EQ(int64_t(w["threads"]), 1);
    ++workers;
  }
  EXPECT_EQ(workers, 16) << config.body;
  for (int c = 0; c < 16; ++c) EXPECT_EQ(cpus.count(std::to_string(c)), 1u) << c;
  EXPECT_EQ(int64_t(doc["thread_budget"]), 16) << config.body;
  // The runtimes say what they are.
  HttpResult metadata = http.Get("/v2/models/fixed");
  ASSERT_EQ(metadata.status, 200);
  EXPECT_NE(metadata.body.find("\"emulated\":1"), std::string::npos) << metadata.body;
  EXPECT_TRUE(agent_->WaitForLog("virtual node of 1 socket(s), 16 core(s), 16 CPU(s)"));
}

// A slice of b rows at t threads lasts at least the profile's L[t,b] (a lower bound only: the
// machine may be slower, never faster).
TEST_F(VirtualNodeTest, ABatchLastsAtLeastItsProfiledLatency) {
  StartAgent(TwoModels());
  HttpClient http("127.0.0.1", agent_->http_port());
  ASSERT_EQ(http.Post("/v2/models/fixed/infer", Body(1)).status, 200);  // connection warm
  const auto start = std::chrono::steady_clock::now();
  HttpResult r = http.Post("/v2/models/fixed/infer", Body(4));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GE(took, std::chrono::milliseconds(300 * 9 / 10));  // L[4,4] = 300 ms
  EXPECT_TRUE(agent_->WaitForLog("fixed/0: batch of 4 row(s) computed")) << agent_->Digest();
}

TEST_F(VirtualNodeTest, StopsItsRuntimesAndRemovesItsSharedMemory) {
  StartAgent(TwoModels());
  const std::vector<pid_t> runtimes = agent_->RuntimePids();
  ASSERT_EQ(runtimes.size(), 17u) << agent_->Digest();
  const pid_t pid = agent_->pid();
  EXPECT_FALSE(testing::SegmentsOf(pid).empty());
  const std::optional<int> status = agent_->Stop(SIGTERM);
  ASSERT_TRUE(status.has_value()) << agent_->Digest();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent_->Digest();
  for (pid_t r : runtimes) EXPECT_FALSE(testing::ProcessExists(r)) << "runtime " << r;
  EXPECT_TRUE(testing::SegmentsOf(pid).empty());  // the node's state too
}

bool WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return !testing::ProcessExists(pid);
  pollfd p{fd, POLLIN, 0};
  const int rc = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return rc == 1;
}

TEST_F(VirtualNodeTest, EmulatedRuntimesDieWithTheirAgent) {
  StartAgent(Model("fixed", profile_, "{max_batch: 4}", "[{count: 2, threads: 2, batch: 2}]"));
  const std::vector<pid_t> runtimes = agent_->RuntimePids();
  ASSERT_EQ(runtimes.size(), 2u);
  agent_->Stop(SIGKILL);
  for (pid_t r : runtimes) EXPECT_TRUE(WaitForExit(r, std::chrono::seconds(30))) << r;
}

// An emulated slice longer than slice_timeout_s is a hung runtime to the agent's watchdog, as a
// real one would be: it is killed and replaced.
TEST_F(VirtualNodeTest, TheHangWatchdogKillsAnEmulatedRuntimeThatOverruns) {
  const std::string slow = dir_.path() + "/slow.csv";
  std::ofstream(slow) << "threads,batch,latency_ms\n1,1,1\n1,2,20000\n";
  StartAgent(Model("slow", slow, "{max_batch: 2, max_delay_us: 0}",
                   "[{count: 1, threads: 1, batch: 2}]", "    slice_timeout_s: 1\n",
                   /*warmup_iterations=*/0));
  HttpClient http("127.0.0.1", agent_->http_port());
  // Until its first report a runtime is allowed startup_timeout_s: one quick slice first.
  HttpResult first = http.Post("/v2/models/slow/infer", Body(1));
  ASSERT_EQ(first.status, 200) << first.error << first.body << agent_->Digest();
  HttpResult r = http.Post("/v2/models/slow/infer", Body(2));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_TRUE(agent_->WaitForLog("killed it")) << agent_->Digest();
  EXPECT_TRUE(agent_->WaitForLogCount("instance slow/", 2)) << agent_->Digest();
}

// Closed-loop clients posting one-row requests to one model until stopped; counts what failed.
class ClosedLoop {
 public:
  ClosedLoop(uint16_t port, const std::string& model, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, port, model] {
        HttpClient http("127.0.0.1", port);
        while (!stop_.load()) {
          const HttpResult r = http.Post("/v2/models/" + model + "/infer", VirtualNodeBody());
          std::lock_guard<std::mutex> lock(mu_);
          ++answered_;
          if (r.status != 200 && first_failure_.empty()) {
            first_failure_ = std::to_string(r.status) + " " + r.body.substr(0, 300) + r.error;
          }
          if (r.status != 200) ++failed_;
        }
      });
    }
  }
  ~ClosedLoop() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::string Describe() {
    std::lock_guard<std::mutex> lock(mu_);
    return "answered " + std::to_string(answered_) + ", failed " + std::to_string(failed_) +
           (first_failure_.empty() ? "" : ", first failure: " + first_failure_);
  }
  int64_t failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  static std::string VirtualNodeBody() {
    return R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]})";
  }

  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  int64_t answered_ = 0;
  int64_t failed_ = 0;
  std::string first_failure_;
};

// Each model's CPUs in /v2/node/partition, and the CPUs its runtimes (serving, draining,
// parked) are on in /v2/models/{m}/config.
struct NodeView {
  std::map<std::string, int> cpus;
  std::map<std::string, std::set<int>> runtime_cpus;
  std::string body;
};

// The CPUs of a list as the management API writes it ("0-3,8"); empty if it is not one.
std::set<int> CpuSet(std::string_view list) {
  const StatusOr<std::vector<int>> cpus = ParseCpuList(list);
  return cpus.ok() ? std::set<int>(cpus->begin(), cpus->end()) : std::set<int>();
}

NodeView ReadNode(HttpClient* management, const std::vector<std::string>& models) {
  NodeView view;
  simdjson::dom::parser parser;
  const HttpResult partition = management->Get("/v2/node/partition");
  view.body = partition.body;
  if (partition.status != 200) return view;
  simdjson::dom::element doc;
  if (parser.parse(partition.body).get(doc) != simdjson::SUCCESS) return view;
  simdjson::dom::array list;
  if (doc["models"].get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element m : list) {
      view.cpus[std::string(std::string_view(m["name"]))] = static_cast<int>(int64_t(m["cpus"]));
    }
  }
  for (const std::string& name : models) {
    const HttpResult config = management->Get("/v2/models/" + name + "/config");
    if (config.status != 200) continue;
    simdjson::dom::element c = parser.parse(config.body);
    for (const char* kind : {"workers", "parked"}) {
      simdjson::dom::array workers;
      if (c[kind].get(workers) != simdjson::SUCCESS) continue;
      for (simdjson::dom::element w : workers) {
        for (int cpu : CpuSet(std::string_view(w["cpus"]))) view.runtime_cpus[name].insert(cpu);
      }
    }
  }
  return view;
}

// An agent on 16 virtual CPUs with two `instances: auto` models, a and b, sharing them
// (server.node_partition), deciding every `interval_ms`.
std::unique_ptr<AgentProcess> StartPartitionedPair(const std::string& profile, int interval_ms) {
  const std::string batching = "{max_batch: 16, max_delay_us: 1000}";
  return std::make_unique<AgentProcess>(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
      "virtual_cpus: 16, partition_interval_ms: " +
          std::to_string(interval_ms) + "}\nmodels:\n" + Model("a", profile, batching, "auto") +
          Model("b", profile, batching, "auto"));
}

// Polls the node until `done` holds (false after 90 s, a test failure), checking at every read
// that no CPU holds runtimes of both models and that the shares add up to at most the node.
bool AwaitNode(AgentProcess* agent, HttpClient* management, const char* what,
               const std::function<bool(NodeView&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  NodeView view;
  while (std::chrono::steady_clock::now() < deadline) {
    view = ReadNode(management, {"a", "b"});
    for (int cpu : view.runtime_cpus["a"]) {
      EXPECT_EQ(view.runtime_cpus["b"].count(cpu), 0u) << "CPU " << cpu << " " << view.body;
    }
    EXPECT_LE(view.cpus["a"] + view.cpus["b"], 16) << view.body;
    if (done(view)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, not ordering
  }
  ADD_FAILURE() << "no " << what << " within 90 s: " << view.body << agent->Digest();
  return false;
}

// Closed-loop clients enough to put a model behind on half the node (the node partition's rule
// 1 moves on the queue, not on the rate: partition_policy.h): on 8 CPUs the profile serves ~85
// rows/s, so its oldest queued row waits ~3 s, beyond twice what a set that keeps up makes it
// wait (~1.5 s at the batches it cuts from a backlog).
constexpr int kBehindClients = 256;

// Two `instances: auto` models on one node of 16 CPUs (server.node_partition): the CPUs follow
// the load, from A while B idles to B while A idles, and the two models' runtimes are never on
// one CPU. Every request of both phases is answered.
TEST_F(VirtualNodeTest, TheNodePartitionMovesCpusToTheBusyModelAndNeverSharesOne) {
  agent_ = StartPartitionedPair(profile_, 200);
  ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  HttpClient management("127.0.0.1", agent_->management_port());
  auto await = [&](const char* what, const std::function<bool(NodeView&)>& done) {
    return AwaitNode(agent_.get(), &management, what, done);
  };
  ASSERT_TRUE(await("partition", [](NodeView& v) { return v.cpus["a"] > 0 && v.cpus["b"] > 0; }));
  {
    ClosedLoop load(agent_->http_port(), "a", kBehindClients);
    ASSERT_TRUE(await("move to a", [](NodeView& v) { return v.cpus["a"] >= 3 * v.cpus["b"]; }));
    load.Stop();
    EXPECT_EQ(load.failed(), 0) << load.Describe();
  }
  {
    ClosedLoop load(agent_->http_port(), "b", kBehindClients);
    ASSERT_TRUE(await("move to b", [](NodeView& v) { return v.cpus["b"] >= 3 * v.cpus["a"]; }));
    load.Stop();
    EXPECT_EQ(load.failed(), 0) << load.Describe();
  }
  HttpClient metrics("127.0.0.1", agent_->metrics_port());
  const HttpResult scrape = metrics.Get("/metrics");
  EXPECT_NE(scrape.body.find("packrat_partition_moves_total"), std::string::npos);
  EXPECT_NE(scrape.body.find("packrat_model_cpus{model=\"b\"}"), std::string::npos);
}

// A model falling behind decides at once (NodeControllerOptions::watch), not at the next
// interval: with an hour between decisions, the CPUs still move to the model whose load began.
TEST_F(VirtualNodeTest, AModelBehindGetsCpusWithoutWaitingForTheInterval) {
  agent_ = StartPartitionedPair(profile_, 3'600'000);
  ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  HttpClient management("127.0.0.1", agent_->management_port());
  ClosedLoop load(agent_->http_port(), "a", kBehindClients);
  EXPECT_TRUE(AwaitNode(agent_.get(), &management, "move to a", [](NodeView& v) {
    return v.cpus["a"] > 0 && v.cpus["a"] >= 3 * v.cpus["b"];
  }));
  load.Stop();
  EXPECT_EQ(load.failed(), 0) << load.Describe();
}

// Long polls of model `m`'s config on the management port: each Next() answers once the
// model's revision passes the last one seen (or after 10 s).
class ConfigPoll {
 public:
  explicit ConfigPoll(uint16_t port) : http_("127.0.0.1", port) {}
  // The config as parsed (valid until the next call); false where it could not be read.
  bool Next(simdjson::dom::element* doc) {
    const HttpResult config =
        http_.Get("/v2/models/m/config?timeout_ms=10000&wait_after=" + std::to_string(revision_));
    body_ = config.body;
    if (config.status != 200 || parser_.parse(body_).get(*doc) != simdjson::SUCCESS) return false;
    revision_ = static_cast<uint64_t>(int64_t((*doc)["revision"]));
    return true;
  }
  const std::string& body() const { return body_; }

 private:
  HttpClient http_;
  simdjson::dom::parser parser_;
  uint64_t revision_ = 0;
  std::string body_;
};

// A profile optimistic for thin instances only (as real 16 cores measured BERT-like's): on 4
// virtual CPUs 4 × ⟨t=1⟩ serve 40 rows/s on the profile and the fat ⟨t=4⟩ 33, but beside 3 busy
// neighbours (emulate.neighbour_slowdown 1) a one-thread instance runs 2× slower (20 rows/s)
// while the fat one, without neighbours, runs as profiled. Saturated by closed-loop clients,
// the model moves to the fat plan, which counts at its profile until served (SlowdownTracker),
// and every request is answered.
TEST_F(VirtualNodeTest, AModelLearnsAPlanItsProfileRanksLowerByServingIt) {
  const std::string profile = dir_.path() + "/thin-on-paper.csv";
  std::ofstream(profile) << "threads,batch,latency_ms\n"
                            "1,1,100\n1,2,200\n1,4,400\n"
                            "4,1,30\n4,2,60\n4,4,120\n";
  agent_ = std::make_unique<AgentProcess>(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
      "virtual_cpus: 4}\nmodels:\n"
      "  - name: m\n"
      "    emulate: {profile: " +
          profile +
          ", load_s: 0.2, neighbour_slowdown: 1}\n"
          "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
          "    outputs: [{name: y, datatype: FP32, shape: [-1, 3]}]\n"
          "    batching: {max_batch: 4, max_delay_us: 1000}\n"
          "    instances: auto\n"
          "    warmup_iterations: 1\n");
  ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  // The fat runtime serving, moved to by a rule of the policy.
  ConfigPoll poll(agent_->management_port());
  const auto learned = [&] {
    simdjson::dom::element doc;
    simdjson::dom::array instances;
    if (!poll.Next(&doc) || doc["instances"].get(instances) != simdjson::SUCCESS ||
        instances.size() != 1 || int64_t(instances.at(0)["threads"]) != 4) {
      return false;
    }
    simdjson::dom::array moves;
    return doc["autoscaler"]["moves"].get(moves) == simdjson::SUCCESS && moves.size() > 0;
  };
  ClosedLoop load(agent_->http_port(), "m", 12);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  bool served = learned();
  while (!served && std::chrono::steady_clock::now() < deadline) served = learned();
  load.Stop();
  EXPECT_TRUE(served) << poll.body() << agent_->Digest();
  EXPECT_EQ(load.failed(), 0) << load.Describe();
}

// A step from nothing to a pool of 64 closed-loop clients, which send no faster than they are
// answered: on the fat plan for B = 1 (⟨1,16,1⟩, ~55 rows/s in the batches it cuts from a
// backlog) the arrivals never exceed what it serves, so no rate shows the overload; the queue
// does (Autoscaler rule 0). Threads pay little on this profile (L = 10 + 40·b / t^0.3 ms): one
// instance a CPU serves 300-400 rows/s. The model gets there, and every request is answered.
TEST_F(VirtualNodeTest, AnOverloadThatHidesItsRateGetsTheMostCapacity) {
  const std::string profile = dir_.path() + "/threads-pay-little.csv";
  {
    std::ofstream out(profile);
    out << "threads,batch,latency_ms\n";
    for (int t : {1, 2, 4, 8, 16}) {
      for (int b = 1; b <= 64; b *= 2)
        out << t << ',' << b << ',' << 10 + 40.0 * b / std::pow(t, 0.3) << '\n';
    }
  }
  agent_ = std::make_unique<AgentProcess>(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
      "virtual_cpus: 16}\nmodels:\n"
      "  - name: m\n"
      "    emulate: {profile: " +
          profile +
          ", load_s: 0.2}\n"
          "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
          "    outputs: [{name: y, datatype: FP32, shape: [-1, 3]}]\n"
          "    batching: {max_batch: 64, max_delay_us: 1000, p99_target_ms: 200}\n"
          "    instances: auto\n"
          "    warmup_iterations: 1\n");
  ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
  HttpClient management("127.0.0.1", agent_->management_port());
  HttpResult set =
      management.Request("PUT", "/v2/models/m/config",
                         R"({"instances":[{"count":1,"threads":16,"batch":1}],"adaptive":true})");
  ASSERT_EQ(set.status, 200) << set.body;
  // Runtimes serving, on each new revision.
  ConfigPoll poll(agent_->management_port());
  const auto runtimes = [&] {
    simdjson::dom::element doc;
    if (!poll.Next(&doc)) return 0;
    int64_t count = 0;
    for (simdjson::dom::element g : doc["instances"].get_array()) count += int64_t(g["count"]);
    return static_cast<int>(count);
  };
  ASSERT_EQ(runtimes(), 1) << poll.body();
  ClosedLoop load(agent_->http_port(), "m", 64);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int serving = 1;
  while (serving < 8 && std::chrono::steady_clock::now() < deadline) serving = runtimes();
  load.Stop();
  EXPECT_GE(serving, 8) << poll.body() << agent_->Digest();
  EXPECT_EQ(load.failed(), 0) << load.Describe();
}

TEST_F(VirtualNodeTest, ARealModelOnAVirtualNodeIsAConfigError) {
  AgentProcess agent(PACKRAT_AGENT_PATH,
                     "server: {http: 127.0.0.1:0, virtual_cpus: 16}\nmodels:\n"
                     "  - name: real\n    path: /models/real.pt\n"
                     "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
                     "    outputs: [{name: y, datatype: FP32, shape: [-1, 3]}]\n"
                     "    instances: [{count: 1, threads: 1, batch: 1}]\n");
  EXPECT_TRUE(agent.WaitForLog("models[0]: is not emulated")) << agent.Digest();
  const std::optional<int> status = agent.Stop(0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << agent.Digest();
}

}  // namespace
}  // namespace packrat
