// Faults and overload against the real agent: slow clients, a connection cap, a full queue,
// expired deadlines and an agent killed with SIGKILL. Every request sent is counted against
// the answers received, so that none is lost.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/raw_connection.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;
using testing::RawConnection;

const std::string kModels = PACKRAT_MODELS_DIR;

std::string TinyModel(const std::string& batching, const std::string& instances) {
  return "models:\n"
         "  - name: tiny\n"
         "    path: " +
         kModels +
         "/tiny_mlp.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
         "    batching: " +
         batching + "\n    instances: " + instances + "\n    warmup_iterations: 1\n";
}

std::string TinyBody(int rows, const std::string& parameters = "") {
  std::string data = "[";
  for (int i = 0; i < rows * 16; ++i) data += (i ? ",0.5" : "0.5");
  data += "]";
  return "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + std::to_string(rows) +
         ",16],\"data\":" + data + "}]" +
         (parameters.empty() ? "" : ",\"parameters\":" + parameters) + "}";
}

// Blocks until process `pid` (not necessarily our child) has exited, or `timeout`.
bool WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return !testing::ProcessExists(pid);
  pollfd p{fd, POLLIN, 0};
  const int rc = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return rc == 1;
}

// A two_head request of one row whose ids input holds `ids` INT64 values.
std::string TwoHeadBody(int64_t ids) {
  std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,8],"data":[0,1,2,3,4,5,6,7]},)"
      R"({"name":"ids","datatype":"INT64","shape":[1,)";
  body += std::to_string(ids);
  body += R"(],"data":[)";
  body.reserve(body.size() + 2 * ids + 8);
  for (int64_t i = 0; i < ids; ++i) body += i ? ",3" : "3";
  body += "]}]}";
  return body;
}

// A container's /dev/shm is small (Docker's default is 64 MiB; a memory emptyDir may have a
// size limit) and the slabs are sparse. The agent backs a slab's pages before it writes them,
// so a request whose tensors do not fit in what is left gets 503 with the reason (the
// operator's to mend, not the client's), instead of a SIGBUS that ends the agent; smaller
// requests are still served, and a batch that does not fit runs request by request.
TEST(HardeningTest, ARequestThatOverflowsDevShmIs503AndTheAgentLives) {
  if (!testing::CanMountPrivateDevShm()) {
    GTEST_SKIP() << "a private /dev/shm needs CAP_SYS_ADMIN";
  }
  const std::string config =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
      "max_body_bytes: 16777216}\n"
      "models:\n"
      "  - name: two_head\n"
      "    path: " +
      kModels +
      "/two_head.pt\n"
      "    inputs: [{name: x, datatype: FP32, shape: [-1, 8]},\n"
      "             {name: ids, datatype: INT64, shape: [-1, -1]}]\n"
      "    outputs: [{name: scores, datatype: FP32, shape: [-1, 5]},\n"
      "              {name: best, datatype: INT64, shape: [-1]}]\n"
      "    batching: {max_batch: 4, max_delay_us: 1000000, variable_tensor_bytes: 16777216}\n"
      "    instances: [{count: 1, threads: 1, batch: 4}]\n"
      "    warmup_iterations: 1\n";
  testing::AgentProcessOptions options;
  options.private_dev_shm = "8m";  // the slabs' 16 MiB for ids fit the model, not /dev/shm
  AgentProcess agent(PACKRAT_AGENT_PATH, config, options);
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient client("127.0.0.1", agent.http_port());
  const HttpResult big =
      client.Post("/v2/models/two_head/infer", TwoHeadBody(1'200'000));  // 9.6 MB
  EXPECT_EQ(big.status, 503) << big.body.substr(0, 300) << big.error << agent.Digest();
  EXPECT_NE(big.body.find("no room in shared memory (/dev/shm)"), std::string::npos) << big.body;
  EXPECT_TRUE(testing::ProcessExists(agent.pid())) << agent.Digest();
  const HttpResult small = client.Post("/v2/models/two_head/infer", TwoHeadBody(4));
  EXPECT_EQ(small.status, 200) << small.body << small.error;

  // Three requests of 3.2 MB in one batch (the delay holds it for a second): 9.6 MB at once do
  // not fit, one by one in the two slots they do.
  std::vector<std::thread> clients;
  std::vector<int> codes(3, 0);
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      HttpClient c("127.0.0.1", agent.http_port());
      codes[i] = c.Post("/v2/models/two_head/infer", TwoHeadBody(400'000)).status;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(codes, (std::vector<int>{200, 200, 200})) << agent.Digest();
  EXPECT_NE(agent.Log().find("a slice of 3 row(s) does not fit"), std::string::npos)
      << "the three did not share a batch" << agent.Digest();
}

TEST(HardeningTest, SlowClientsAreDisconnectedAndOthersServed) {
  AgentProcess agent(PACKRAT_AGENT_PATH,
                     "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
                     "idle_timeout_s: 1, read_timeout_s: 1}\n" +
                         TinyModel("{max_batch: 8}", "[{count: 1, threads: 1, batch: 4}]"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  // Headers that never finish, and a body that never finishes.
  RawConnection slow_headers(agent.http_port());
  RawConnection slow_body(agent.http_port());
  ASSERT_TRUE(slow_headers.connected() && slow_body.connected());
  slow_headers.Send("POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-");
  slow_body.Send("POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{");
  // Meanwhile a normal client is served.
  HttpClient client("127.0.0.1", agent.http_port());
  EXPECT_EQ(client.Post("/v2/models/tiny/infer", TinyBody(1)).status, 200);
  const auto [h, h_closed] = slow_headers.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(h_closed) << "a client stuck in its headers is disconnected";
  const auto [b, b_closed] = slow_body.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(b_closed) << "a client stuck in its body is disconnected";
  EXPECT_EQ(client.Post("/v2/models/tiny/infer", TinyBody(2)).status, 200);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

TEST(HardeningTest, ConnectionsBeyondTheCapGet503) {
  AgentProcess agent(PACKRAT_AGENT_PATH,
                     "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
                     "max_connections: 3}\n" +
                         TinyModel("{max_batch: 8}", "[{count: 1, threads: 1, batch: 4}]"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<HttpClient>("127.0.0.1", agent.http_port()));
    ASSERT_EQ(clients.back()->Post("/v2/models/tiny/infer", TinyBody(1)).status, 200);
  }
  HttpClient fourth("127.0.0.1", agent.http_port());
  const HttpResult r = fourth.Post("/v2/models/tiny/infer", TinyBody(1));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("too many connections (the limit is 3)"), std::string::npos) << r.body;
  for (auto& c : clients) EXPECT_EQ(c->Post("/v2/models/tiny/infer", TinyBody(1)).status, 200);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

TEST(HardeningTest, OverloadBeyondTheQueueIs429AndNothingIsLost) {
  // A tiny queue (8 rows) and a batch delay that keeps rows queued: a burst overflows it.
  AgentProcess agent(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n" +
          TinyModel("{max_batch: 8, max_queue_rows: 8, max_delay_us: 200000, "
                    "max_inflight_batches: 1}",
                    "[{count: 1, threads: 1, batch: 64}]"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  constexpr int kClients = 24;
  std::mutex mu;
  std::map<int, int> codes;
  bool retry_after = true;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      HttpClient client("127.0.0.1", agent.http_port());
      const HttpResult r = client.Post("/v2/models/tiny/infer", TinyBody(1));
      std::lock_guard<std::mutex> lock(mu);
      ++codes[r.status];
      if (r.status == 429) {
        retry_after = retry_after && r.headers.count("retry-after") == 1 &&
                      r.body.find("queue is full") != std::string::npos;
      }
    });
  }
  for (auto& t : threads) t.join();
  int answered = 0;
  for (const auto& [code, n] : codes) answered += n;
  EXPECT_EQ(answered, kClients);
  EXPECT_EQ(codes[200] + codes[429], kClients) << "only 200 and 429";
  EXPECT_GE(codes[429], 1) << "24 rows into a queue of 8";
  EXPECT_GE(codes[200], 8);
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

TEST(HardeningTest, RequestsThatExpireInTheQueueAre504AndNeverRun) {
  // One instance, one batch in flight: a long ResNet-18 batch holds it while short-deadline
  // requests wait behind it.
  AgentProcess agent(PACKRAT_AGENT_PATH,
                     "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n"
                     "models:\n"
                     "  - name: cnn\n"
                     "    path: " +
                         kModels +
                         "/resnet18.pt\n"
                         "    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]\n"
                         "    outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]\n"
                         "    batching: {max_batch: 8, max_delay_us: 0, max_inflight_batches: 1, "
                         "timeout_ms: 30000}\n"
                         "    instances: [{count: 1, threads: 1, batch: 8}]\n"
                         "    warmup_iterations: 1\n");
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  auto image_body = [](int rows, const std::string& params) {
    std::string data = "[";
    for (int i = 0; i < rows * 3 * 224 * 224; ++i) data += (i ? ",0" : "0");
    data += "]";
    return "{\"id\":\"" + std::string(params.empty() ? "big" : "small") +
           "\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" +
           std::to_string(rows) + ",3,224,224],\"data\":" + data + "}]" +
           (params.empty() ? "" : ",\"parameters\":" + params) + "}";
  };
  const std::string big = image_body(8, "");
  const std::string small = image_body(1, "{\"timeout\":20000}");  // 20 ms, in µs
  std::atomic<int> big_status{0};
  std::thread big_client([&] {
    HttpClient client("127.0.0.1", agent.http_port());
    big_status = client.Post("/v2/models/cnn/infer", big).status;
  });
  ASSERT_TRUE(agent.WaitForLog("queued request 'big'")) << agent.Digest();
  constexpr int kSmall = 6;
  std::vector<int> small_status(kSmall);
  std::vector<std::thread> smalls;
  for (int i = 0; i < kSmall; ++i) {
    smalls.emplace_back([&, i] {
      HttpClient client("127.0.0.1", agent.http_port());
      const HttpResult r = client.Post("/v2/models/cnn/infer", small);
      small_status[i] = r.status;
      if (r.status == 504) {
        EXPECT_NE(r.body.find("timed out after"), std::string::npos) << r.body;
      }
    });
  }
  for (auto& t : smalls) t.join();
  big_client.join();
  EXPECT_EQ(big_status.load(), 200);
  for (int s : small_status) EXPECT_EQ(s, 504);
  // The runtime computed the big batch and nothing else (its log line may still be on the
  // way when the answer is).
  EXPECT_TRUE(agent.WaitForLog("batch of 8 row(s) computed")) << agent.Digest();
  const std::string log = agent.Log();
  EXPECT_EQ(log.find("batch of 1 row(s) computed"), std::string::npos) << log;
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

TEST(HardeningTest, AgentKilledWithSigkillLeavesNothingAfterTheNextStart) {
  const std::string config =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n" +
      TinyModel("{max_batch: 8}", "[{count: 2, threads: 1, batch: 4}]");
  auto first = std::make_unique<AgentProcess>(PACKRAT_AGENT_PATH, config);
  ASSERT_TRUE(first->WaitUntilServing()) << first->Digest();
  const pid_t dead_agent = first->pid();
  const std::vector<pid_t> runtimes = first->RuntimePids();
  ASSERT_EQ(runtimes.size(), 2u);
  const bool cgroups = first->Log().find("runtimes get cpuset cgroups") != std::string::npos;
  ASSERT_FALSE(testing::SegmentsOf(dead_agent).empty());
  first->Stop(SIGKILL);
  // The runtimes follow their agent (PR_SET_PDEATHSIG).
  for (pid_t r : runtimes) EXPECT_TRUE(WaitForExit(r, std::chrono::seconds(30))) << r;
  // What a killed agent leaves: its segments, and its runtimes' cgroups.
  EXPECT_FALSE(testing::SegmentsOf(dead_agent).empty());
  if (cgroups) {
    EXPECT_EQ(testing::CgroupsOf(dead_agent), 2);
  }

  AgentProcess second(PACKRAT_AGENT_PATH, config);
  ASSERT_TRUE(second.WaitUntilServing()) << second.Digest();
  EXPECT_TRUE(testing::SegmentsOf(dead_agent).empty());
  EXPECT_NE(second.Log().find("removed stale shared-memory segment packrat." +
                              std::to_string(dead_agent)),
            std::string::npos);
  if (cgroups) {
    EXPECT_EQ(testing::CgroupsOf(dead_agent), 0);
    EXPECT_NE(second.Log().find("removed stale cgroup"), std::string::npos);
  }
  HttpClient client("127.0.0.1", second.http_port());
  EXPECT_EQ(client.Post("/v2/models/tiny/infer", TinyBody(3)).status, 200);
  EXPECT_EQ(second.Stop(SIGTERM).value_or(-1), 0);
}

// A port another process holds ends start-up: exit status 1 with one line that names the
// listener's key, no signal, nothing left behind. (Each of the three HTTP listeners ended in
// SIGSEGV: the failed start's shutdown stopped servers never made.)
TEST(HardeningTest, APortInUseEndsStartUpWithOneLineThatNamesItsKey) {
  const int held = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(held, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(held, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(held, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  for (const std::string key : {"http", "management", "metrics", "grpc"}) {
    std::string server =
        "{http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, grpc: 127.0.0.1:0";
    const std::string free = key + ": 127.0.0.1:0";
    server.replace(server.find(free), free.size(), key + ": 127.0.0.1:" + port);
    AgentProcess agent(PACKRAT_AGENT_PATH,
                       "server: " + server + "}\n" +
                           TinyModel("{max_batch: 4}", "[{count: 1, threads: 1, batch: 4}]"));
    EXPECT_TRUE(agent.WaitForLog("cannot start: server." + key + ": ")) << key << "\n"
                                                                        << agent.Digest();
    const std::optional<int> status = agent.Stop(0);
    ASSERT_TRUE(status.has_value()) << key;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1)
        << key << ": status " << *status << "\n"
        << agent.Digest();
    EXPECT_TRUE(testing::SegmentsOf(agent.pid()).empty()) << key;
  }
  close(held);
}

// A model file or a repository folder that is not there is a config error naming its line,
// as other config mistakes are (the agent ran on with "models loaded: 0 of 1 ready"); a
// profile folder that cannot be written ends start-up too.
TEST(HardeningTest, AFileOrFolderThatIsNotThereEndsStartUpNamingIt) {
  testing::TempDir dir("packrat-missing");
  const std::string listen =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {listen + "}\nmodels:\n  - name: m\n    path: " + dir.path() +
           "/absent.pt\n    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
           "    outputs: [{name: y, datatype: FP32, shape: [-1, 3]}]\n"
           "    instances: [{count: 1, threads: 1, batch: 1}]\n",
       ":4: models[0].path: cannot read '" + dir.path() + "/absent.pt'"},
      {listen + ",\n  model_repository: " + dir.path() + "/absent}\n",
       ":2: server.model_repository: '" + dir.path() + "/absent' is not a folder"},
      // Where an `instances: auto` model would keep its profile: checked at start, not after
      // minutes of profiling.
      {listen + ", profile_dir: " + dir.path() + "/file/profiles}\n" +
           TinyModel("{max_batch: 4}", "auto"),
       "cannot start: server.profile_dir: cannot write '" + dir.path() + "/file/profiles'"},
  };
  std::ofstream(dir.path() + "/file") << "not a folder\n";
  for (const auto& [config, error] : cases) {
    AgentProcess agent(PACKRAT_AGENT_PATH, config);
    EXPECT_TRUE(agent.WaitForLog(error)) << agent.Digest();
    const std::optional<int> status = agent.Stop(0);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << agent.Digest();
  }
}

// Every other start-up mistake of the issue's list ends the same way: exit status 1 with one
// line that names it, and no shared memory, cgroup or runtime left behind. A model the config
// asks for that does not load ends start-up too, under strict readiness (the default): a
// file that is not TorchScript, or a /dev/shm with no room for its slabs.
TEST(HardeningTest, EveryStartUpMistakeEndsWithOneLineAndLeavesNothingBehind) {
  testing::TempDir dir("packrat-startup");
  const std::string listen =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0";
  const std::string model = TinyModel("{max_batch: 4}", "[{count: 2, threads: 1, batch: 4}]");
  std::string not_torchscript = model;
  not_torchscript.replace(not_torchscript.find("tiny_mlp.pt"), 11, "not_a_model.pt");
  std::ofstream(dir.path() + "/open-token") << "token\n";
  ASSERT_EQ(chmod((dir.path() + "/open-token").c_str(), 0644), 0);
  struct Case {
    std::string config;
    std::string error;
    std::string private_dev_shm = "";
  };
  std::vector<Case> cases = {
      {listen + ", unix_socket: " + dir.path() + "/absent/agent.sock}\n" + model,
       ":1: server.unix_socket: '" + dir.path() + "/absent' is not a folder"},
      {listen + ", management_token_file: " + dir.path() + "/absent-token}\n" + model,
       "cannot start: cannot read the management token file '" + dir.path() + "/absent-token'"},
      {listen + ", management_token_file: " + dir.path() + "/open-token}\n" + model,
       "cannot start: the management token file '" + dir.path() +
           "/open-token' is readable by every user"},
      {listen + "}\n" + not_torchscript,
       "cannot start: model 'tiny': runtime tiny/g1.0 failed to start: INVALID_ARGUMENT: cannot "
       "load TorchScript model"},
  };
  if (testing::CanMountPrivateDevShm()) {
    cases.push_back({listen + "}\n" + model,
                     "cannot start: model 'tiny': no room in shared memory (/dev/shm)", "16k"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    testing::AgentProcessOptions options;
    options.private_dev_shm = c.private_dev_shm;
    AgentProcess agent(PACKRAT_AGENT_PATH, c.config, options);
    EXPECT_TRUE(agent.WaitForLog(c.error)) << agent.Digest();
    const std::optional<int> status = agent.Stop(0);
    ASSERT_TRUE(status.has_value()) << agent.Digest();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << agent.Digest();
    EXPECT_TRUE(testing::SegmentsOf(agent.pid()).empty());
    EXPECT_EQ(testing::CgroupsOf(agent.pid()), 0);
    EXPECT_TRUE(testing::RuntimesOf(agent.pid()).empty());
  }
}

// Lenient readiness serves what loaded: the same model file that is not TorchScript leaves
// the agent up, live and ready, with that model not ready.
TEST(HardeningTest, LenientReadinessServesOnWithoutTheModelThatDidNotLoad) {
  std::string config =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: "
      "127.0.0.1:0, strict_readiness: false}\n" +
      TinyModel("{max_batch: 4}", "[{count: 1, threads: 1, batch: 4}]");
  config.replace(config.find("tiny_mlp.pt"), 11, "not_a_model.pt");
  AgentProcess agent(PACKRAT_AGENT_PATH, config);
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient client("127.0.0.1", agent.http_port());
  EXPECT_EQ(client.Get("/v2/health/live").status, 200);
  EXPECT_EQ(client.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(client.Get("/v2/models/tiny/ready").status, 400);  // not ready, as Triton says it
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

// Cgroups the agent may not write (a container without the host's cgroups): the runtimes are
// pinned with affinity instead, and the agent says so where operators look, the management
// API and the isolation metric.
TEST(HardeningTest, CgroupsThatCannotBeWrittenFallBackToAffinityVisibly) {
  if (!testing::CanMountPrivateDevShm()) {
    GTEST_SKIP() << "read-only cgroups need a private mount namespace (CAP_SYS_ADMIN)";
  }
  testing::AgentProcessOptions options;
  options.read_only_cgroups = true;
  AgentProcess agent(
      PACKRAT_AGENT_PATH,
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}\n" +
          TinyModel("{max_batch: 4}", "[{count: 1, threads: 1, batch: 4}]"),
      options);
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient client("127.0.0.1", agent.http_port());
  EXPECT_EQ(client.Post("/v2/models/tiny/infer", TinyBody(2)).status, 200);
  HttpClient management("127.0.0.1", agent.management_port());
  const HttpResult config = management.Get("/v2/models/tiny/config");
  EXPECT_NE(config.body.find("\"isolation\":\"affinity\""), std::string::npos) << config.body;
  EXPECT_EQ(config.body.find("\"isolation\":\"cgroup\""), std::string::npos) << config.body;
  HttpClient metrics("127.0.0.1", agent.metrics_port());
  EXPECT_NE(metrics.Get("/metrics")
                .body.find(R"(packrat_runtime_isolation{isolation="affinity",model="tiny"} 1)"),
            std::string::npos);
  EXPECT_EQ(testing::CgroupsOf(agent.pid()), 0);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

// With server.management_token_file, the management address answers only requests that
// carry the token: 401 with a JSON error and WWW-Authenticate otherwise, reads and plan changes
// alike; the data address needs none.
TEST(HardeningTest, TheManagementTokenGuardsEveryManagementRoute) {
  testing::TempDir dir("packrat-token");
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << "correct-horse-battery\n";
  ASSERT_EQ(chmod(token_file.c_str(), 0600), 0);
  AgentProcess agent(PACKRAT_AGENT_PATH,
                     "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
                     "management_token_file: " +
                         token_file + "}\n" +
                         TinyModel("{max_batch: 4}", "[{count: 1, threads: 1, batch: 4}]"));
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  HttpClient management("127.0.0.1", agent.management_port());
  const std::map<std::string, std::string> right = {
      {"Authorization", "Bearer correct-horse-battery"}};
  const std::map<std::string, std::string> wrong = {{"Authorization", "Bearer correct-horse"}};
  for (const std::string target :
       {"/v2/models/tiny/config", "/v2/health/ready", "/v2/models/tiny"}) {
    SCOPED_TRACE(target);
    HttpResult r = management.Get(target);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer realm=\"packrat-management\"");
    EXPECT_EQ(management.Request("GET", target, "", wrong).status, 401);
    EXPECT_EQ(management.Request("GET", target, "", right).status, 200);
  }
  const std::string plan = R"({"instances":[{"count":1,"threads":1,"batch":2}]})";
  EXPECT_EQ(management.Request("PUT", "/v2/models/tiny/config", plan).status, 401);
  EXPECT_EQ(management.Request("PUT", "/v2/models/tiny/config", plan, wrong).status, 401);
  EXPECT_EQ(management.Request("PUT", "/v2/models/tiny/config", plan, right).status, 200);
  // The data address is not the management one: no token there, but for its one control
  // path, a change of the log settings.
  HttpClient client("127.0.0.1", agent.http_port());
  EXPECT_EQ(client.Post("/v2/models/tiny/infer", TinyBody(1)).status, 200);
  EXPECT_EQ(client.Get("/v2/logging").status, 200);
  const std::string quiet = R"({"log_info":false})";
  EXPECT_EQ(client.Post("/v2/logging", quiet).status, 401);
  EXPECT_EQ(client.Request("POST", "/v2/logging", quiet, wrong).status, 401);
  EXPECT_EQ(client.Request("POST", "/v2/logging", quiet, right).status, 200);
  // The token never reaches the log.
  EXPECT_EQ(agent.Log().find("correct-horse"), std::string::npos);
  EXPECT_EQ(agent.Stop(SIGTERM).value_or(-1), 0);
}

namespace check_config {

struct Run {
  int code = -1;
  std::string out, err;
};

// packrat-agent --check-config FILE, its stdout and stderr apart.
Run CheckConfig(const std::string& file, const testing::TempDir& dir) {
  Run r;
  const std::string err = dir.path() + "/check.err";
  const std::string command =
      std::string(PACKRAT_AGENT_PATH) + " --check-config '" + file + "' 2>'" + err + "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

// The YAML of a --check-config output, without its leading comment lines.
std::string Yaml(const std::string& out) {
  size_t start = 0;
  while (out.compare(start, 1, "#") == 0) start = out.find('\n', start) + 1;
  return out.substr(start);
}

}  // namespace check_config

// `--check-config FILE` (CI pipelines, the chart's pre-install hook): the agent's own
// validation without starting anything. A valid file prints the config it would serve, which
// is itself a valid config that prints the same; the repository's models are validated too;
// each mistake is one line and exit 1; a file the config names that is not here is a note.
TEST(HardeningTest, CheckConfigValidatesAFileAndPrintsWhatTheAgentWouldServe) {
  testing::TempDir dir("packrat-check-config");
  std::filesystem::create_directories(dir.path() + "/repo/good");
  std::ofstream(dir.path() + "/repo/good/model.yaml")
      << "path: " << kModels << "/tiny_mlp.pt\n"
      << "inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
         "outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
         "instances: [{count: 1, threads: 1, batch: 2}]\n";
  const std::string config = dir.path() + "/packrat.yaml";
  std::ofstream(config) << "server: {http: 0.0.0.0:0, model_repository: repo, unix_socket: "
                           "/absent/agent.sock}\n"
                        << TinyModel("{max_batch: 4, p99_target_ms: 50}", "auto");

  const check_config::Run valid = check_config::CheckConfig(config, dir);
  ASSERT_EQ(valid.code, 0) << valid.err;
  EXPECT_NE(valid.out.find("# Repository models, each valid: good\n"), std::string::npos);
  EXPECT_NE(valid.out.find("  model_repository: " + dir.path() + "/repo\n"), std::string::npos);
  EXPECT_NE(valid.out.find("max_batch_latency_ms: 25\n"), std::string::npos) << valid.out;
  EXPECT_NE(valid.err.find("note: " + config + ":1: server.unix_socket: '/absent' is not a folder"),
            std::string::npos)
      << valid.err;

  const std::string resolved = dir.path() + "/resolved.yaml";
  std::ofstream(resolved) << valid.out;
  const check_config::Run again = check_config::CheckConfig(resolved, dir);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(check_config::Yaml(again.out), check_config::Yaml(valid.out));

  std::filesystem::create_directories(dir.path() + "/repo/bad");
  std::ofstream(dir.path() + "/repo/bad/model.yaml") << "path: m.pt\ninstanses: auto\n";
  const check_config::Run bad_model = check_config::CheckConfig(config, dir);
  EXPECT_EQ(bad_model.code, 1);
  EXPECT_EQ(bad_model.out, "");
  EXPECT_NE(bad_model.err.find(dir.path() + "/repo/bad/model.yaml:2: model.instanses: unknown key"),
            std::string::npos)
      << bad_model.err;

  std::ofstream(config) << "server: {http: 0.0.0.0:80800}\n" << TinyModel("{}", "auto");
  const check_config::Run bad = check_config::CheckConfig(config, dir);
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err, "packrat-agent: " + config + ":1: server.http: bad port in '0.0.0.0:80800'\n");
}

}  // namespace
}  // namespace packrat
