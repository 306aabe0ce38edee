// Reconfiguration of a real agent under load: forced plan changes through the management API,
// the batch-size estimator's automatic ones, and a runtime killed mid-batch. Every request sent
// is counted and every answer checked against direct libtorch; no runtime process, segment or
// cgroup may be left behind.
#include <sched.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_runner.h"
#include "tests/support/agent_process.h"
#include "tests/support/config_watch.h"
#include "tests/support/http_client.h"
#include "tests/support/profile_files.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;
using testing::RewriteProfiles;

const std::string kModels = PACKRAT_MODELS_DIR;
constexpr char kCpusetRoot[] = "/sys/fs/cgroup/cpuset";

std::string Config(const std::string& instances, const std::string& extra = "",
                   const std::string& batching = "") {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
         "models:\n"
         "  - name: tiny\n"
         "    path: " +
         kModels +
         "/tiny_mlp.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
         "    batching: {max_batch: 8, max_delay_us: 500" +
         batching +
         "}\n"
         "    instances: " +
         instances +
         "\n"
         "    warmup_iterations: 1\n" +
         extra;
}

// A request body and the outputs direct libtorch computes for it.
struct Sample {
  std::string body;
  std::vector<float> expected;
};

std::vector<Sample> MakeSamples(int n) {
  runtime::ModelRunnerOptions o;
  o.model_path = kModels + "/tiny_mlp.pt";
  o.threads = 1;
  auto runner = runtime::ModelRunner::Create(o);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<Sample> samples;
  for (int i = 0; i < n; ++i) {
    const int64_t rows = 1 + i % 3;
    std::vector<float> x(rows * 16);
    for (float& f : x) f = normal(rng);
    std::string data = "[";
    char buf[32];
    for (size_t k = 0; k < x.size(); ++k) {
      if (k) data += ',';
      data.append(buf, std::to_chars(buf, buf + sizeof(buf), x[k]).ptr);
    }
    data += "]";
    Sample s;
    s.body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" +
             std::to_string(rows) + ",16],\"data\":" + data + "}]}";
    runtime::RawTensor in;
    in.datatype = DataType::kFp32;
    in.shape = {rows, 16};
    in.data = x.data();
    in.byte_size = x.size() * 4;
    std::vector<uint8_t> buffer(1 << 16);
    std::vector<runtime::RawTensor> out;
    EXPECT_TRUE((*runner)->Run({in}, buffer.data(), buffer.size(), &out).ok());
    const float* y = static_cast<const float*>(out[0].data);
    s.expected.assign(y, y + out[0].byte_size / 4);
    samples.push_back(std::move(s));
  }
  return samples;
}

// The samples of one row (8 outputs), for clients that must never send two rows at once.
std::vector<Sample> SingleRows(const std::vector<Sample>& samples) {
  std::vector<Sample> rows;
  for (const Sample& s : samples) {
    if (s.expected.size() == 8) rows.push_back(s);
  }
  return rows;
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
    if (std::fabs(got[i] - expected[i]) > 1e-5) return false;
  }
  return true;
}

// Closed-loop clients that send samples until stopped and count every outcome; with `pause`,
// each waits that long after an answer before it sends again (a paced load, not a wait for the
// agent).
class Load {
 public:
  Load(uint16_t port, const std::vector<Sample>* samples, int clients,
       std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, port, samples, c, pause] {
        HttpClient client("127.0.0.1", port);
        size_t i = c;
        while (!stop_.load()) {
          if (i != static_cast<size_t>(c)) std::this_thread::sleep_for(pause);
          const Sample& s = (*samples)[i++ % samples->size()];
          const HttpResult r = client.Post("/v2/models/tiny/infer", s.body);
          std::lock_guard<std::mutex> lock(mu_);
          ++answered_;
          if (r.status == 200) {
            if (!Matches(r.body, s.expected)) ++wrong_;
          } else {
            ++failed_by_code_[r.status];
            if (first_failure_.empty()) {
              first_failure_ = std::to_string(r.status);
              first_failure_ += ' ';
              first_failure_.append(r.body, 0, 300);
              first_failure_ += r.error;
            }
          }
          cv_.notify_all();
        }
      });
    }
  }
  ~Load() { Stop(); }

  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Blocks until `n` more requests were answered (false after a minute).
  bool WaitForMore(int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t target = answered_ + n;
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return answered_ >= target; });
  }
  int64_t answered() {
    std::lock_guard<std::mutex> lock(mu_);
    return answered_;
  }
  int64_t wrong() {
    std::lock_guard<std::mutex> lock(mu_);
    return wrong_;
  }
  std::map<int, int64_t> failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_by_code_;
  }
  // For failure messages: the counts and the first failed answer.
  std::string Describe() {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream out;
    out << "answered " << answered_ << ", wrong " << wrong_ << ", failed by code {";
    for (const auto& [code, n] : failed_by_code_) out << " " << code << ": " << n;
    out << " }";
    if (!first_failure_.empty()) out << ", first failure: " << first_failure_;
    return out.str();
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t answered_ = 0;                   // guarded by mu_
  int64_t wrong_ = 0;                      // guarded by mu_
  std::map<int, int64_t> failed_by_code_;  // guarded by mu_
  std::string first_failure_;              // guarded by mu_
  std::vector<std::thread> threads_;
};

struct WorkerView {
  pid_t pid;
  std::string cpus;
  int threads;
  int64_t batch;
  std::string state;
  bool started_cold;
  std::string start_priority;  // "" where no idle start was asked for
};

// An autoscaler's move or hold (the management API's "autoscaler" object).
struct ReasonView {
  std::string rule;
  std::string state;  // a move's: switching, serving or failed
  int64_t from_batch = 0;
  int64_t to_batch = 0;
  std::string passed_over;  // empty: none
  double target_capacity = 0;
};

struct ConfigView {
  uint64_t revision = 0;
  int64_t generation = 0;
  int64_t batch = 0;
  int64_t backlog_batch = 0;
  std::vector<WorkerView> workers;
  std::vector<WorkerView> parked;
  int64_t estimate = 0;
  std::vector<ReasonView> moves;  // oldest first
  std::optional<ReasonView> last_hold;

  // Whether every worker serves in the active set (no set is draining or dead).
  bool Settled() const {
    for (const auto& w : workers) {
      if (w.state != "active") return false;
    }
    return !workers.empty();
  }
  bool Moved(const std::string& rule) const {
    for (const auto& m : moves) {
      if (m.rule == rule) return true;
    }
    return false;
  }
  // Whether the newest move was by `rule`, and its new set serves with no old one draining.
  bool MovedAndSettled(const std::string& rule) const {
    return !moves.empty() && moves.back().rule == rule && moves.back().state == "serving" &&
           Settled();
  }
};

ReasonView ParseReason(simdjson::dom::element r) {
  ReasonView v;
  v.rule = std::string(std::string_view(r["rule"]));
  std::string_view state;
  if (r["state"].get(state) == simdjson::SUCCESS) v.state = std::string(state);
  v.from_batch = int64_t(r["from_batch"]);
  v.to_batch = int64_t(r["to_batch"]);
  std::string_view passed;
  if (r["passed_over"].get(passed) == simdjson::SUCCESS) v.passed_over = std::string(passed);
  double capacity = 0;
  if (r["target_capacity"].get(capacity) == simdjson::SUCCESS) v.target_capacity = capacity;
  return v;
}

ConfigView ParseConfig(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(body);
  ConfigView v;
  v.revision = uint64_t(doc["revision"]);
  v.generation = int64_t(doc["generation"]);
  v.batch = int64_t(doc["batch"]);
  v.backlog_batch = int64_t(doc["backlog_batch"]);
  v.estimate = int64_t(doc["estimator"]["estimate"]);
  auto worker = [](simdjson::dom::element w) {
    bool cold = false;
    if (w["started_cold"].get(cold) != simdjson::SUCCESS) cold = false;
    std::string_view priority;
    if (w["start_priority"].get(priority) != simdjson::SUCCESS) priority = "";
    return WorkerView{static_cast<pid_t>(int64_t(w["pid"])),
                      std::string(std::string_view(w["cpus"])),
                      static_cast<int>(int64_t(w["threads"])),
                      int64_t(w["batch"]),
                      std::string(std::string_view(w["state"])),
                      cold,
                      std::string(priority)};
  };
  for (simdjson::dom::element w : doc["workers"].get_array()) v.workers.push_back(worker(w));
  for (simdjson::dom::element w : doc["parked"].get_array()) v.parked.push_back(worker(w));
  simdjson::dom::element autoscaler = doc["autoscaler"];
  for (simdjson::dom::element m : autoscaler["moves"].get_array())
    v.moves.push_back(ParseReason(m));
  simdjson::dom::element hold;
  if (autoscaler["last_hold"].get(hold) == simdjson::SUCCESS) v.last_hold = ParseReason(hold);
  return v;
}

// The runtime cgroups agent `pid` has on this machine's cpuset hierarchy.
std::vector<std::string> CgroupsOf(pid_t pid) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(kCpusetRoot)) return out;
  const std::string prefix = "packrat." + std::to_string(pid) + ".";
  for (const auto& e : std::filesystem::directory_iterator(kCpusetRoot)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name != prefix + "agent") out.push_back(name);
  }
  return out;
}

// Slow latencies (ms) for a one-thread profile: 10, 10, 13.3 and 20 rows/s at b = 1, 2, 4, 8,
// so B = 1 runs a backlog in batches of 1 (b = 2 serves no more) and B = 8 serves the most.
std::optional<double> SlowLatency(int /*threads*/, int batch) {
  switch (batch) {
    case 1:
      return 100.0;
    case 2:
      return 200.0;
    case 4:
      return 300.0;
    case 8:
      return 400.0;
    default:
      return std::nullopt;
  }
}

class ReconfigurationTest : public ::testing::Test {
 protected:
  void StartAgent(const std::string& config) {
    agent_ = std::make_unique<AgentProcess>(PACKRAT_AGENT_PATH, config);
    ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
    cgroups_ = agent_->Log().find("runtimes get cpuset cgroups") != std::string::npos;
    management_ = std::make_unique<HttpClient>("127.0.0.1", agent_->management_port());
  }

  ConfigView GetConfig() {
    const HttpResult r = management_->Get("/v2/models/tiny/config");
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseConfig(r.body);
  }

  // The config once `done(config)` holds, watched with the management API's long poll;
  // nullopt, with a failure naming `what`, after `timeout`.
  std::optional<ConfigView> AwaitConfig(const std::string& what,
                                        const std::function<bool(const ConfigView&)>& done,
                                        std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::string why;
    const std::optional<std::string> body = testing::AwaitModelConfig(
        *management_, "tiny", [&](const std::string& b) { return done(ParseConfig(b)); }, timeout,
        &why);
    if (!body) {
      ADD_FAILURE() << "waiting for " << what << ": " << why << agent_->Digest();
      return std::nullopt;
    }
    return ParseConfig(*body);
  }

  // SIGTERM: exit 0, and no runtime ever started, segment or cgroup is left.
  void StopAndCheckClean(const std::set<pid_t>& runtimes) {
    const pid_t pid = agent_->pid();
    const auto status = agent_->Stop(SIGTERM);
    ASSERT_TRUE(status.has_value()) << agent_->Digest();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent_->Digest();
    for (pid_t r : runtimes) {
      EXPECT_FALSE(testing::ProcessExists(r)) << "runtime " << r << agent_->Digest();
    }
    EXPECT_TRUE(testing::SegmentsOf(pid).empty()) << agent_->Digest();
    EXPECT_TRUE(CgroupsOf(pid).empty()) << agent_->Digest();
  }

  // Starts the agent once so that it measures and stores the tiny model's profile (at
  // `auto_threads`) in `profile_dir`, stops it, replaces the stored latencies with
  // `latency(threads, batch)` (failing the test unless `rows` rows were replaced), and starts it
  // again on them, by default (`overload`) with a fast overload path and no step down for 10
  // minutes after an overload move. The tiny model runs in microseconds against the rewritten
  // milliseconds, so its measured slowdowns say nothing: slowdown_floor 1 plans on the
  // rewritten profile as written. Adds every runtime started to `runtimes`. `batching`,
  // `reconfiguration`: more keys of those sections (", key: value").
  void StartOnRewrittenProfile(
      const std::string& profile_dir, int auto_threads,
      const std::function<std::optional<double>(int, int)>& latency, int rows,
      std::set<pid_t>* runtimes, const std::string& batching = "",
      const std::string& reconfiguration = "",
      const std::string& overload = "overload_window_ms: 200, scale_down_delay_ms: 600000") {
    const std::string config =
        "server: {profile_dir: " + profile_dir + ", " +
        Config("auto",
               "    auto_threads: " + std::to_string(auto_threads) +
                   "\n"
                   "    reconfiguration: {sample_period_ms: 10, " +
                   overload + ", slowdown_floor: 1" + reconfiguration + "}\n",
               batching)
            .substr(std::string("server: {").size());
    StartAgent(config);
    for (const auto& w : GetConfig().workers) runtimes->insert(w.pid);
    StopAndCheckClean(*runtimes);
    ASSERT_EQ(RewriteProfiles(profile_dir, latency), rows);
    StartAgent(config);
    ASSERT_TRUE(agent_->WaitForLog("using stored profile")) << agent_->Digest();
    for (const auto& w : GetConfig().workers) runtimes->insert(w.pid);
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<HttpClient> management_;
  bool cgroups_ = false;
};

TEST_F(ReconfigurationTest, TwentyForcedReconfigurationsUnderLoadLoseNothing) {
  const std::vector<Sample> samples = MakeSamples(48);
  // Every change starts a shadow set and stops the old one (parked runtimes would make the
  // moves back instant: AMoveBackTakesParkedRuntimes).
  StartAgent(
      Config("[{count: 2, threads: 1, batch: 4}]", "    reconfiguration: {parked_runtimes: 0}\n"));
  const std::string thin = R"({"instances":[{"count":2,"threads":1,"batch":4}]})";
  const std::string fat = R"({"instances":[{"count":1,"threads":2,"batch":8}]})";
  std::set<pid_t> all_runtimes;
  ConfigView before = GetConfig();
  ASSERT_EQ(before.workers.size(), 2u);
  for (const auto& w : before.workers) all_runtimes.insert(w.pid);

  Load load(agent_->http_port(), &samples, 4);
  ASSERT_TRUE(load.WaitForMore(20)) << load.Describe() << agent_->Digest();
  for (int k = 0; k < 20; ++k) {
    const bool to_fat = k % 2 == 0;
    const HttpResult r = management_->Request("PUT", "/v2/models/tiny/config", to_fat ? fat : thin);
    ASSERT_EQ(r.status, 200) << r.body << agent_->Digest();
    const ConfigView after = ParseConfig(r.body);
    EXPECT_EQ(after.generation, before.generation + 1);
    EXPECT_EQ(after.batch, 8);
    ASSERT_EQ(after.workers.size(), to_fat ? 1u : 2u) << r.body;
    std::set<std::string> cpus;
    for (const auto& w : after.workers) {
      EXPECT_EQ(w.state, "active");
      EXPECT_EQ(w.threads, to_fat ? 2 : 1);
      EXPECT_TRUE(cpus.insert(w.cpus).second) << "two instances of one set share " << w.cpus;
      all_runtimes.insert(w.pid);
    }
    // The old set is gone once the change is answered: its processes and cgroups.
    for (const auto& w : before.workers) {
      EXPECT_FALSE(testing::ProcessExists(w.pid)) << "old runtime " << w.pid;
    }
    if (cgroups_) {
      EXPECT_EQ(CgroupsOf(agent_->pid()).size(), after.workers.size());
    }
    before = after;
    ASSERT_TRUE(load.WaitForMore(10)) << load.Describe() << agent_->Digest()
                                      << "requests stopped flowing after reconfiguration " << k;
  }
  load.Stop();
  EXPECT_GT(load.answered(), 200);
  EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
  EXPECT_EQ(load.wrong(), 0) << load.Describe();
  EXPECT_EQ(all_runtimes.size(), 2u + 10 * 1 + 10 * 2);
  StopAndCheckClean(all_runtimes);
}

TEST_F(ReconfigurationTest, BadPlanChangesAreClearErrorsAndChangeNothing) {
  StartAgent(Config("[{count: 1, threads: 1, batch: 4}]"));
  const ConfigView before = GetConfig();
  struct Case {
    std::string target, body;
    int status;
    std::string error;
  };
  // 600 groups of 1024 instances of 4096 threads each: 2.5e9 threads (beyond an int) and 614,400
  // instances, each group alone within its limits.
  std::string many = R"({"instances":[)";
  for (int i = 0; i < 600; ++i) {
    if (i) many += ',';
    many += R"({"count":1024,"threads":4096,"batch":1})";
  }
  many += "]}";
  const std::vector<Case> cases = {
      {"tiny", R"({"instances":[{"count":64,"threads":64,"batch":1}]})", 400, "only"},
      {"tiny", many, 400, "the plan has 614400 instances; at most 1024"},
      {"tiny", R"({"instances":[{"count":2147483648,"threads":1,"batch":1}]})", 400,
       "'instances[0].count' is out of range"},
      {"tiny", R"({"instances":[{"count":2147483647,"threads":1,"batch":1}]})", 400,
       "count <= 1024"},
      {"tiny", R"({"instances":[{"count":1,"threads":0,"batch":1}]})", 400, "threads"},
      {"tiny", R"({"instances":[{"count":1,"threads":1}]})", 400, "needs count, threads"},
      {"tiny", R"({"instances":[]})", 400, "non-empty"},
      {"tiny", R"({"batch":4})", 400, "static plan"},
      {"tiny", R"({"adaptive":true})", 400, "instances: auto"},
      {"tiny", R"({"colour":"red"})", 400, "unknown field"},
      {"tiny", R"({"instances":)", 400, "not valid JSON"},
      {"nope", R"({"batch":4})", 404, "unknown model"},
  };
  for (const Case& c : cases) {
    const HttpResult r = management_->Request("PUT", "/v2/models/" + c.target + "/config", c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(c.error), std::string::npos) << c.body << " -> " << r.body;
  }
  EXPECT_EQ(management_->Request("DELETE", "/v2/models/tiny/config").status, 405);
  const ConfigView after = GetConfig();
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.workers[0].pid, before.workers[0].pid);
  // The data-plane address changes no plan: its /config is Triton's read-only view of the model
  // (triton_model_config.h), and a PUT there is refused.
  HttpClient data("127.0.0.1", agent_->http_port());
  const HttpResult triton = data.Get("/v2/models/tiny/config");
  EXPECT_EQ(triton.status, 200);
  EXPECT_NE(triton.body.find("\"instance_group\""), std::string::npos) << triton.body;
  EXPECT_EQ(data.Request("PUT", "/v2/models/tiny/config", R"({"batch":4})").status, 405);
  StopAndCheckClean({before.workers[0].pid});
}

// Latencies (ms) whose rows/s grow with b on one and two threads: a step up to the estimate
// serves more. (The tiny model's own profile is microseconds of noise: it may rank b = 1 first.)
std::optional<double> GrowingLatency(int threads, int batch) {
  return (1.0 + 0.5 * batch) / threads;
}

TEST_F(ReconfigurationTest, EstimatorFollowsTheLoad) {
  const std::vector<Sample> samples = MakeSamples(24);
  // A short estimator window so that the test takes seconds: 10 ms samples, a decision every
  // second over the last 50 samples. Without the overload fast path, which on a busy machine
  // may move B up first (OverloadMovesToABatchThatKeepsUpAtOnce tests it).
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(profiles.path(), 2, GrowingLatency, 8, &all_runtimes, "", "",
                          "overload_window_ms: 0");
  // Idle: B falls from max_batch (8) to 1.
  const auto idle = AwaitConfig("the step down to B = 1", [](const ConfigView& c) {
    return c.MovedAndSettled("estimator_step_down") && c.batch == 1;
  });
  ASSERT_TRUE(idle);
  ASSERT_FALSE(idle->moves.empty());
  EXPECT_EQ(idle->moves.back().rule, "estimator_step_down");
  EXPECT_EQ(idle->moves.back().from_batch, 8);
  {
    // Four closed-loop clients keep about four rows in the system: B rises again.
    Load load(agent_->http_port(), &samples, 4);
    const auto up = AwaitConfig(
        "the step up", [](const ConfigView& c) { return c.MovedAndSettled("estimator_step_up"); });
    ASSERT_TRUE(up);
    EXPECT_EQ(up->moves.back().rule, "estimator_step_up");
    const ConfigView busy = *up;
    EXPECT_GT(busy.batch, 1);
    EXPECT_GE(busy.estimate, 2);
    for (const auto& w : busy.workers) all_runtimes.insert(w.pid);
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  // Metrics show the reconfigurations.
  HttpClient metrics("127.0.0.1", agent_->metrics_port());
  const std::string page = metrics.Get("/metrics").body;
  EXPECT_NE(page.find("packrat_reconfigurations_total{model=\"tiny\"} "), std::string::npos);
  EXPECT_EQ(page.find("packrat_reconfigurations_total{model=\"tiny\"} 0\n"), std::string::npos);
  EXPECT_NE(page.find("packrat_reconfiguration_duration_seconds_count{model=\"tiny\"}"),
            std::string::npos);
  for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

// Rows arriving faster than the serving plan runs them move the model at once to a B whose plan
// keeps up, before the estimator could (its window is five times the overload window), and the
// estimator's steps back down wait out scale_down_delay_ms. The profile is the agent's own, with
// its latencies replaced by SlowLatency, so that a few closed-loop clients outrun the plan for
// B = 1 (10 rows/s) and B = 8 (20 rows/s) serves the most.
TEST_F(ReconfigurationTest, OverloadMovesToABatchThatKeepsUpAtOnce) {
  const std::vector<Sample> samples = MakeSamples(24);
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(profiles.path(), 1, SlowLatency, 4, &all_runtimes);
  if (HasFatalFailure()) return;
  const HttpResult r =
      management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1,"adaptive":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(GetConfig().batch, 1);
  for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
  {
    // One client sending one row at a time never has a row waiting behind the running one:
    // however fast it sends, the plan is not behind.
    const std::vector<Sample> single_rows = SingleRows(samples);
    Load one(agent_->http_port(), &single_rows, 1);
    ASSERT_TRUE(one.WaitForMore(300)) << one.Describe() << agent_->Digest();
    one.Stop();
    EXPECT_FALSE(GetConfig().Moved("overload")) << agent_->Digest();
  }
  {
    Load load(agent_->http_port(), &samples, 4);
    const auto eight = AwaitConfig(
        "the overload move", [](const ConfigView& c) { return c.MovedAndSettled("overload"); });
    ASSERT_TRUE(eight);
    const ReasonView& move = eight->moves.back();
    EXPECT_EQ(move.rule, "overload");
    EXPECT_EQ(move.from_batch, 1);
    EXPECT_EQ(move.to_batch, 8);
    EXPECT_NEAR(move.target_capacity, 20, 0.05);
    EXPECT_EQ(eight->batch, 8);
    for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  // Idle now: the estimator starts afresh once the backlog is gone, wants B = 1 and waits.
  const auto held = AwaitConfig("the step down held", [](const ConfigView& c) {
    return c.last_hold && c.last_hold->rule == "scale_down_delay";
  });
  ASSERT_TRUE(held);
  EXPECT_EQ(held->last_hold->from_batch, 8);
  EXPECT_EQ(held->batch, 8);
  EXPECT_FALSE(held->Moved("estimator_step_down")) << agent_->Digest();
  StopAndCheckClean(all_runtimes);
}

// batching.max_batch_latency_ms bounds the agent's own moves: with the profile of the test
// above and a limit of 350 ms, the overload move goes to B = 4 (300 ms, 13.3 rows/s), not to
// B = 8 (400 ms, 20 rows/s).
TEST_F(ReconfigurationTest, OverloadMovesOnlyToPlansWithinTheBatchLatencyLimit) {
  const std::vector<Sample> samples = MakeSamples(24);
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(profiles.path(), 1, SlowLatency, 4, &all_runtimes,
                          ", max_batch_latency_ms: 350");
  if (HasFatalFailure()) return;
  const HttpResult r =
      management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1,"adaptive":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  {
    Load load(agent_->http_port(), &samples, 4);
    const auto four = AwaitConfig(
        "the overload move", [](const ConfigView& c) { return c.MovedAndSettled("overload"); });
    ASSERT_TRUE(four);
    EXPECT_EQ(four->moves.back().to_batch, 4);
    EXPECT_NEAR(four->moves.back().target_capacity, 13.33, 0.05);
    EXPECT_EQ(four->batch, 4);
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  for (const ReasonView& m : GetConfig().moves) EXPECT_NE(m.to_batch, 8) << m.rule;
  for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

// A larger batch is worth its longer wait only while it serves more rows per second: with a
// profile whose capacity is flat in b (100 rows/s at every batch size), the rows that four
// closed-loop clients keep in the system make the estimator ask for a larger B, and the model
// stays at B = 1.
TEST_F(ReconfigurationTest, EstimatorStaysWhereALargerBatchServesNoMore) {
  const std::vector<Sample> samples = MakeSamples(24);
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(
      profiles.path(), 1, [](int, int batch) { return std::optional<double>(10.0 * batch); }, 4,
      &all_runtimes);
  if (HasFatalFailure()) return;
  const HttpResult r =
      management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1,"adaptive":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(GetConfig().backlog_batch, 1);  // nor does a larger batch cut from a backlog
  {
    Load load(agent_->http_port(), &samples, 4);
    const auto kept = AwaitConfig("the step up held", [](const ConfigView& c) {
      return c.last_hold && c.last_hold->rule == "step_up_gains_too_little";
    });
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->last_hold->from_batch, 1);
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  EXPECT_EQ(GetConfig().batch, 1);
  EXPECT_TRUE(GetConfig().moves.empty()) << agent_->Digest();
  for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

// A batch cut while rows queue beyond B takes only as many as still serve more rows per
// second: the profile below serves 10 rows/s at b = 1 and 20 at b = 2, 4 and 8, so eight
// closed-loop clients, whose rows queue behind the running batches, are served in batches of
// at most 2 rows (max_batch is 8), and of 2 rows at times.
TEST_F(ReconfigurationTest, ABacklogRunsInBatchesOnlyAsLargeAsServeMore) {
  const std::vector<Sample> single_rows = SingleRows(MakeSamples(24));
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(
      profiles.path(), 1,
      [](int, int batch) { return std::optional<double>(batch == 1 ? 100.0 : 50.0 * batch); }, 4,
      &all_runtimes);
  if (HasFatalFailure()) return;
  const HttpResult r = management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(GetConfig().batch, 1);
  EXPECT_EQ(GetConfig().backlog_batch, 2);
  testing::HttpClient metrics("127.0.0.1", agent_->metrics_port());
  // The executed batches' rows, from the histogram of slices (one instance: a slice is a
  // batch): {le="1", le="2", count}.
  auto batch_rows = [&] {
    const std::string page = metrics.Get("/metrics").body;
    auto value = [&](const std::string& series) -> int64_t {
      const size_t at = page.find("\n" + series + " ");
      if (at == std::string::npos) return -1;
      return std::stoll(page.substr(at + series.size() + 2));
    };
    const std::string h = "packrat_batch_size_rows";
    return std::array<int64_t, 3>{value(h + R"(_bucket{model="tiny",le="1"})"),
                                  value(h + R"(_bucket{model="tiny",le="2"})"),
                                  value(h + R"(_count{model="tiny"})")};
  };
  const std::array<int64_t, 3> before = batch_rows();
  {
    Load load(agent_->http_port(), &single_rows, 8);
    // Until a batch of 2 rows ran (each pass one scrape: a later one counts more batches).
    for (int i = 0; i < 20; ++i) {
      const std::array<int64_t, 3> now = batch_rows();
      if (now[0] - before[0] != now[2] - before[2]) break;
      ASSERT_TRUE(load.WaitForMore(100)) << load.Describe() << agent_->Digest();
    }
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  const std::array<int64_t, 3> after = batch_rows();
  const int64_t batches = after[2] - before[2];
  EXPECT_GT(batches - (after[0] - before[0]), 0) << "no batch of 2 rows in " << batches;
  EXPECT_EQ(after[1] - before[1], batches) << "batches of more than 2 rows";
  for (const auto& w : GetConfig().workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

// A move whose best plan would start runtimes stays on the serving ones when their best plan
// predicts batches within the restart margin (10%) of it: for B = 8 the profile
// below makes two one-thread instances (380 ms) 5% faster than the serving two-thread one
// (400 ms), so the overload move to B = 8 runs ⟨1,2,8⟩ on the runtime that serves B = 1.
// One thread: 60 ms + 80 ms per row; two threads: 80 ms + 40 ms per row, but 240 ms at b = 2.
// B = 1 runs on two threads (120 ms, 8.3 rows/s), and a backlog in batches of 1 (b = 2 serves
// no more); B = 8 serves the most rows/s (20 on two threads), ⟨2,1,4⟩ 5% faster than ⟨1,2,8⟩.
// The latencies are slow so that the overload move goes to B = 8 (any arrival above 13.3
// rows/s, 0.8 of what B = 4 serves) even when closed-loop clients on a busy machine send few.
std::optional<double> MarginLatency(int threads, int batch) {
  if (threads == 2 && batch == 2) return 240.0;
  return threads == 1 ? 60.0 + 80.0 * batch : 80.0 + 40.0 * batch;
}

TEST_F(ReconfigurationTest, AMoveStaysOnTheServingRuntimesUnlessANewPlanIsMuchFaster) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Which plan is "much faster" depends on the rate the closed-loop clients reach, and an
  // instrumented agent reaches another one (CI's ASan pass moved to <2,1,4>). The rule itself
  // is AutoscalerTest.APlanStaysOnTheServingRuntimesWithinTheRestartMargin, at fixed rates.
  GTEST_SKIP() << "the outcome depends on the uninstrumented agent's request rate";
#endif
  const std::vector<Sample> samples = MakeSamples(24);
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  // Without parked runtimes (the next test has them).
  StartOnRewrittenProfile(profiles.path(), 2, MarginLatency, 8, &all_runtimes, "",
                          ", parked_runtimes: 0");
  if (HasFatalFailure()) return;
  HttpResult r =
      management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1,"adaptive":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const ConfigView one = GetConfig();
  ASSERT_EQ(one.batch, 1);
  ASSERT_EQ(one.workers.size(), 1u);
  ASSERT_EQ(one.workers[0].threads, 2);
  all_runtimes.insert(one.workers[0].pid);
  {
    Load load(agent_->http_port(), &samples, 4);
    const auto moved = AwaitConfig(
        "the overload move", [](const ConfigView& c) { return c.MovedAndSettled("overload"); });
    ASSERT_TRUE(moved);
    // The serving runtime's ⟨1,2,8⟩, with the optimizer's ⟨2,1,4⟩ passed over: at the rate the
    // closed-loop clients send, their simulated p99s are within the restart margin.
    EXPECT_EQ(moved->moves.back().to_batch, 8);
    if (moved->moves.back().passed_over.empty()) {
      // The serving two-thread runtime measured more than ~5% slower than its profile (a busy
      // machine), while one thread, never served, counts at its profile (SlowdownTracker): then
      // the optimizer's plan is more than the margin faster, and rightly taken.
      GTEST_SKIP() << "the serving runtime ran slower than its profile here";
    }
    EXPECT_EQ(moved->moves.back().passed_over, "<2,1,4>");
    const ConfigView eight = *moved;
    EXPECT_EQ(eight.batch, 8);
    ASSERT_EQ(eight.workers.size(), 1u);
    EXPECT_EQ(eight.workers[0].pid, one.workers[0].pid);  // no runtime started
    EXPECT_EQ(eight.workers[0].batch, 8);
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  // The management API's B is the optimizer's plan, whatever runs.
  r = management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":8})");
  ASSERT_EQ(r.status, 200) << r.body;
  const ConfigView thin = ParseConfig(r.body);
  ASSERT_EQ(thin.workers.size(), 2u) << r.body;
  for (const auto& w : thin.workers) {
    EXPECT_EQ(w.threads, 1);
    all_runtimes.insert(w.pid);
  }
  StopAndCheckClean(all_runtimes);
}

// The optimizer's plan that needs runtimes of a shape the model has parked starts nothing: the
// move takes it whatever the restart margin (the setup of the test above, with parking).
TEST_F(ReconfigurationTest, AMoveTakesTheOptimizersPlanWhenItsRuntimesAreParked) {
  const std::vector<Sample> samples = MakeSamples(24);
  testing::TempDir profiles("packrat-profiles");
  std::set<pid_t> all_runtimes;
  StartOnRewrittenProfile(profiles.path(), 2, MarginLatency, 8, &all_runtimes);
  if (HasFatalFailure()) return;
  const ConfigView start = GetConfig();
  ASSERT_EQ(start.workers.size(), 2u);  // the optimizer's ⟨2,1,4⟩ for B = 8
  HttpResult r =
      management_->Request("PUT", "/v2/models/tiny/config", R"({"batch":1,"adaptive":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const ConfigView one = ParseConfig(r.body);
  ASSERT_EQ(one.workers.size(), 1u) << r.body;
  ASSERT_EQ(one.workers[0].threads, 2);
  ASSERT_EQ(one.parked.size(), 2u) << r.body;
  all_runtimes.insert(one.workers[0].pid);
  {
    Load load(agent_->http_port(), &samples, 4);
    const auto moved = AwaitConfig("the overload move", [](const ConfigView& c) {
      return c.MovedAndSettled("overload") && c.parked.size() == 1;
    });
    ASSERT_TRUE(moved);
    const ConfigView eight = *moved;
    EXPECT_EQ(eight.batch, 8);
    ASSERT_EQ(eight.workers.size(), 2u);
    for (const auto& w : eight.workers) {
      EXPECT_EQ(w.threads, 1);
      EXPECT_TRUE(all_runtimes.count(w.pid)) << "runtime " << w.pid << " was started";
    }
    ASSERT_EQ(eight.parked.size(), 1u);
    EXPECT_EQ(eight.parked[0].pid, one.workers[0].pid);
    EXPECT_EQ(eight.moves.back().passed_over, "") << agent_->Digest();
    ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
  }
  StopAndCheckClean(all_runtimes);
}

// An `instances: auto` model whose new plan has the same thread counts at another batch size
// keeps its runtimes: their slabs hold max_batch rows, so only the dispatcher's cut changes, up
// and down, under load, and every answer stays right.
TEST_F(ReconfigurationTest, BatchChangeWithTheSameThreadsKeepsTheRuntimes) {
  const std::vector<Sample> samples = MakeSamples(24);
  StartAgent(Config("auto", "    auto_threads: 1\n    reconfiguration: {adaptive: false}\n"));
  const ConfigView first = GetConfig();
  ASSERT_EQ(first.workers.size(), 1u);
  EXPECT_EQ(first.batch, 8);
  const pid_t runtime = first.workers[0].pid;
  Load load(agent_->http_port(), &samples, 3);
  ASSERT_TRUE(load.WaitForMore(20)) << load.Describe() << agent_->Digest();
  int64_t generation = first.generation;
  for (const int64_t b : {1, 4, 2, 8}) {
    SCOPED_TRACE("B=" + std::to_string(b));
    const HttpResult r = management_->Request("PUT", "/v2/models/tiny/config",
                                              R"({"batch":)" + std::to_string(b) + "}");
    ASSERT_EQ(r.status, 200) << r.body << agent_->Digest();
    const ConfigView now = ParseConfig(r.body);
    EXPECT_EQ(now.generation, ++generation) << r.body << agent_->Digest();
    EXPECT_EQ(now.batch, b);
    ASSERT_EQ(now.workers.size(), 1u) << r.body << agent_->Digest();
    EXPECT_EQ(now.workers[0].pid, runtime) << r.body << agent_->Digest();
    EXPECT_EQ(now.workers[0].batch, b);
    EXPECT_EQ(now.workers[0].state, "active") << r.body;
    ASSERT_TRUE(load.WaitForMore(20))
        << load.Describe() << agent_->Digest() << "requests stopped flowing at B=" << b;
  }
  load.Stop();
  EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
  EXPECT_EQ(load.wrong(), 0) << load.Describe();
  StopAndCheckClean({runtime});
}

// A static plan's runtimes hold b rows: a change of b starts new ones, as before.
TEST_F(ReconfigurationTest, StaticPlanBatchChangeStartsNewRuntimes) {
  const std::vector<Sample> samples = MakeSamples(3);
  StartAgent(Config("[{count: 1, threads: 1, batch: 8}]"));
  const pid_t before = GetConfig().workers.at(0).pid;
  const HttpResult r = management_->Request("PUT", "/v2/models/tiny/config",
                                            R"({"instances":[{"count":1,"threads":1,"batch":4}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const ConfigView after = ParseConfig(r.body);
  ASSERT_EQ(after.workers.size(), 1u);
  EXPECT_NE(after.workers[0].pid, before);
  EXPECT_EQ(after.workers[0].batch, 4);
  HttpClient client("127.0.0.1", agent_->http_port());
  for (const Sample& s : samples) {
    const HttpResult answer = client.Post("/v2/models/tiny/infer", s.body);
    EXPECT_EQ(answer.status, 200) << answer.body;
    EXPECT_TRUE(Matches(answer.body, s.expected)) << answer.body;
  }
  StopAndCheckClean({before, after.workers[0].pid});
}

// With no idle CPU left for the shadow set (the serving set holds every usable one), the new
// runtimes start beside the serving ones: at idle priority, warming up only while still there
// (the default; past a 1-ms limit, cold); cold at normal priority (idle_start_s: 0); or warm
// at normal priority as before (skip_warmup_on_busy_cpus: false too). Either way the new set
// answers right.
TEST_F(ReconfigurationTest, ShadowSetOnBusyCpusStartsAtIdlePriorityOrCold) {
  const std::vector<Sample> samples = MakeSamples(6);
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  const std::string cpus = std::to_string(CPU_COUNT(&mask));
  struct Case {
    const char* reconfiguration;
    bool idle;  // an idle start asked for
    bool cold;  // cold, where no idle start
  };
  for (const Case& c : {Case{"{}", true, false}, Case{"{idle_start_s: 0.001}", true, false},
                        Case{"{idle_start_s: 0}", false, true},
                        Case{"{idle_start_s: 0, skip_warmup_on_busy_cpus: false}", false, false}}) {
    SCOPED_TRACE(c.reconfiguration);
    StartAgent(Config("[{count: " + cpus + ", threads: 1, batch: 1}]",
                      std::string("    reconfiguration: ") + c.reconfiguration + "\n"));
    std::set<pid_t> runtimes;
    for (const auto& w : GetConfig().workers) runtimes.insert(w.pid);
    const HttpResult r =
        management_->Request("PUT", "/v2/models/tiny/config",
                             R"({"instances":[{"count":1,"threads":)" + cpus + R"(,"batch":4}]})");
    ASSERT_EQ(r.status, 200) << r.body;
    const ConfigView after = ParseConfig(r.body);
    ASSERT_EQ(after.workers.size(), 1u) << r.body;
    const WorkerView& shadow = after.workers[0];
    if (c.idle) {
      // Where the agent may bring a runtime back from SCHED_IDLE (root in CI): "idle" when it
      // got to ready there, then warm (it warmed up there); on a machine busy with other work
      // the limit or starvation may end it first. With a 1-ms limit the agent moves it back
      // before it loads: "idle-until-limit", cold. Where it may not: "normal", cold.
      const std::string& p = shadow.start_priority;
      if (p == "normal") {
        EXPECT_TRUE(shadow.started_cold) << r.body;
      } else if (std::string(c.reconfiguration) == "{}") {
        EXPECT_TRUE(p == "idle" || p == "idle-until-limit" || p == "idle-until-starved") << r.body;
        if (p == "idle") {
          EXPECT_FALSE(shadow.started_cold) << r.body;
        }
      } else {
        EXPECT_EQ(p, "idle-until-limit") << r.body;
        EXPECT_TRUE(shadow.started_cold) << r.body;
      }
    } else {
      EXPECT_EQ(shadow.start_priority, "") << r.body;
      EXPECT_EQ(shadow.started_cold, c.cold) << r.body;
    }
    HttpClient client("127.0.0.1", agent_->http_port());
    for (const Sample& s : samples) {
      const HttpResult answer = client.Post("/v2/models/tiny/infer", s.body);
      EXPECT_EQ(answer.status, 200) << answer.body;
      EXPECT_TRUE(Matches(answer.body, s.expected)) << answer.body;
    }
    for (const auto& w : GetConfig().workers) runtimes.insert(w.pid);
    StopAndCheckClean(runtimes);
  }
}

// The runtimes a plan change drops stay parked, idle, up to reconfiguration.parked_runtimes
// (auto: the thread budget); a move back to their shape takes them and starts nothing, under
// load, and every answer stays right. At exit parked runtimes stop like the others.
TEST_F(ReconfigurationTest, AMoveBackTakesParkedRuntimes) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << "needs two usable CPUs";
  const std::vector<Sample> samples = MakeSamples(24);
  const std::string thin = R"({"instances":[{"count":2,"threads":1,"batch":4}]})";
  const std::string fat = R"({"instances":[{"count":1,"threads":2,"batch":8}]})";
  for (const std::string limit : {"auto", "1", "0"}) {
    SCOPED_TRACE("parked_runtimes: " + limit);
    const size_t parks = limit == "auto" ? 2 : static_cast<size_t>(std::stoi(limit));
    StartAgent(Config("[{count: 2, threads: 1, batch: 4}]",
                      "    reconfiguration: {parked_runtimes: " + limit + "}\n"));
    const ConfigView first = GetConfig();
    ASSERT_EQ(first.workers.size(), 2u);
    EXPECT_TRUE(first.parked.empty());
    std::set<pid_t> runtimes, thin_pids;
    for (const auto& w : first.workers) thin_pids.insert(w.pid);
    runtimes = thin_pids;
    Load load(agent_->http_port(), &samples, 3);
    ASSERT_TRUE(load.WaitForMore(20)) << load.Describe() << agent_->Digest();

    HttpResult r = management_->Request("PUT", "/v2/models/tiny/config", fat);
    ASSERT_EQ(r.status, 200) << r.body;
    const ConfigView two = ParseConfig(r.body);
    ASSERT_EQ(two.workers.size(), 1u) << r.body;
    const pid_t fat_pid = two.workers[0].pid;
    runtimes.insert(fat_pid);
    ASSERT_EQ(two.parked.size(), parks) << r.body;
    for (const auto& w : two.parked) {
      EXPECT_EQ(thin_pids.count(w.pid), 1u) << r.body;
      EXPECT_EQ(w.state, "parked");
      EXPECT_EQ(w.threads, 1);
      EXPECT_TRUE(testing::ProcessExists(w.pid));
    }
    HttpClient metrics("127.0.0.1", agent_->metrics_port());
    const std::string parked_series =
        "packrat_instances{batch=\"4\",model=\"tiny\",state=\"parked\",threads=\"1\"} " +
        std::to_string(parks) + "\n";
    EXPECT_EQ(metrics.Get("/metrics").body.find(parked_series) != std::string::npos, parks > 0)
        << metrics.Get("/metrics").body;
    ASSERT_TRUE(load.WaitForMore(20)) << load.Describe() << agent_->Digest();

    r = management_->Request("PUT", "/v2/models/tiny/config", thin);
    ASSERT_EQ(r.status, 200) << r.body;
    const ConfigView three = ParseConfig(r.body);
    ASSERT_EQ(three.workers.size(), 2u) << r.body;
    size_t reused = 0;
    for (const auto& w : three.workers) {
      reused += thin_pids.count(w.pid);
      EXPECT_EQ(w.state, "active");
      runtimes.insert(w.pid);
    }
    EXPECT_EQ(reused, parks) << r.body;
    // The fat runtime is parked in turn (a limit of 1 keeps the newest).
    ASSERT_EQ(three.parked.size(), std::min<size_t>(parks, 1)) << r.body;
    if (parks > 0) {
      EXPECT_EQ(three.parked[0].pid, fat_pid);
    }
    ASSERT_TRUE(load.WaitForMore(20)) << load.Describe() << agent_->Digest();
    load.Stop();
    EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
    EXPECT_EQ(load.wrong(), 0) << load.Describe();
    StopAndCheckClean(runtimes);
  }
}

TEST_F(ReconfigurationTest, KilledRuntimeIsRetriedAndRestarted) {
  const std::vector<Sample> samples = MakeSamples(24);
  StartAgent(Config("[{count: 2, threads: 1, batch: 4}]"));
  const ConfigView before = GetConfig();
  ASSERT_EQ(before.workers.size(), 2u);
  std::set<pid_t> all_runtimes;
  Load load(agent_->http_port(), &samples, 4);
  ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
  const pid_t victim = before.workers[0].pid;
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_TRUE(AwaitConfig("the replacement", [&](const ConfigView& c) {
    return c.generation == before.generation + 1 && c.Settled();
  }));
  ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
  load.Stop();
  // Every request got the right answer: the dead runtime's slices were retried on the live
  // one, and until its replacement served, batches went to the live one alone.
  EXPECT_EQ(load.wrong(), 0) << load.Describe();
  EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
  const ConfigView after = GetConfig();
  ASSERT_EQ(after.workers.size(), 2u);
  for (const auto& w : after.workers) {
    EXPECT_EQ(w.state, "active");
    EXPECT_NE(w.pid, victim);
    all_runtimes.insert(w.pid);
  }
  EXPECT_EQ(after.generation, before.generation + 1);
  // The replacement took the dead runtime's CPUs, which its exit freed, and warmed up there
  // instead of starting cold beside a lease nobody held any more.
  if (before.workers[0].cpus != before.workers[1].cpus) {
    const WorkerView& replacement =
        after.workers[0].pid == before.workers[1].pid ? after.workers[1] : after.workers[0];
    EXPECT_EQ(replacement.cpus, before.workers[0].cpus);
    EXPECT_FALSE(replacement.started_cold);
  }
  HttpClient metrics("127.0.0.1", agent_->metrics_port());
  EXPECT_NE(metrics.Get("/metrics").body.find("packrat_runtime_restarts_total{model=\"tiny\"} 1\n"),
            std::string::npos);
  for (const auto& w : before.workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

// A runtime that stops answering (SIGSTOP: alive, but computing nothing) is hung: after
// slice_timeout_s the agent kills it, retries its slices on the live one and starts a
// replacement, and no request fails.
TEST_F(ReconfigurationTest, HungRuntimeIsKilledRetriedAndRestarted) {
  const std::vector<Sample> samples = MakeSamples(24);
  StartAgent(Config("[{count: 2, threads: 1, batch: 4}]", "    slice_timeout_s: 3\n"));
  const ConfigView before = GetConfig();
  ASSERT_EQ(before.workers.size(), 2u);
  Load load(agent_->http_port(), &samples, 4);
  ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
  const pid_t victim = before.workers[0].pid;
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  ASSERT_TRUE(AwaitConfig("the replacement", [&](const ConfigView& c) {
    return c.generation == before.generation + 1 && c.Settled();
  }));
  ASSERT_TRUE(load.WaitForMore(50)) << load.Describe() << agent_->Digest();
  load.Stop();
  EXPECT_EQ(load.wrong(), 0) << load.Describe();
  EXPECT_TRUE(load.failures().empty()) << load.Describe() << agent_->Digest();
  EXPECT_FALSE(testing::ProcessExists(victim)) << "the hung runtime was not killed";
  const ConfigView after = GetConfig();
  ASSERT_EQ(after.workers.size(), 2u);
  std::set<pid_t> all_runtimes = {victim};
  for (const auto& w : after.workers) {
    EXPECT_EQ(w.state, "active");
    EXPECT_NE(w.pid, victim);
    all_runtimes.insert(w.pid);
  }
  for (const auto& w : before.workers) all_runtimes.insert(w.pid);
  StopAndCheckClean(all_runtimes);
}

}  // namespace
}  // namespace packrat
