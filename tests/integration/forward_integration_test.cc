// End-to-end tests of packrat-forward: a real packrat-agent (listening on a Unix socket as well
// as TCP) and a real packrat-forward process in front of it. Responses through the forwarder are
// byte-identical to direct calls (JSON and binary tensors, an 8 MB body, errors), many requests
// share one keep-alive connection, a missing agent is answered 503 with a JSON error, and
// SIGTERM lets open connections finish before the forwarder exits 0.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "agent/grpc/grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/agent/metrics/child_process.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

namespace net = boost::asio;
using metrics::testing::ChildProcess;
using testing::AgentProcess;
using testing::HttpClient;
using testing::HttpResult;

const std::string kModels = PACKRAT_MODELS_DIR;

std::string TinyConfig(const std::string& socket, const std::string& server_extra) {
  return "server:\n  http: 127.0.0.1:0\n  management: 127.0.0.1:0\n  metrics: 127.0.0.1:0\n"
         "  unix_socket: " +
         socket + "\n" + server_extra +
         "models:\n"
         "  - name: tiny\n"
         "    path: " +
         kModels +
         "/tiny_mlp.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
         "    batching: {max_delay_us: 0, max_queue_rows: 262144}\n"
         "    instances: [{count: 1, threads: 1, batch: 16384}]\n"
         "    warmup_iterations: 1\n";
}

// One request, as HttpClient arguments and as raw bytes.
struct Request {
  std::string name;
  std::string method;
  std::string target;
  std::string body;
  std::map<std::string, std::string> headers;

  // HTTP/1.1 with "Connection: close", so the response ends where the connection does.
  std::string Raw() const {
    std::string raw =
        method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    for (const auto& [k, v] : headers) raw += k + ": " + v + "\r\n";
    if (method == "POST") raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    return raw + "\r\n" + body;
  }
};

std::vector<float> RandomRows(int64_t rows) {
  std::mt19937 rng(static_cast<unsigned>(rows));
  std::normal_distribution<float> normal;
  std::vector<float> values(rows * 16);
  for (float& f : values) f = normal(rng);
  return values;
}

Request JsonInfer(int64_t rows) {
  std::string data;
  for (float f : RandomRows(rows)) {
    if (!data.empty()) data += ',';
    data += std::to_string(f);
  }
  return {"json " + std::to_string(rows) + " rows",
          "POST",
          "/v2/models/tiny/infer",
          "{\"id\":\"j\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" +
              std::to_string(rows) + ",16],\"data\":[" + data + "]}]}",
          {{"Content-Type", "application/json"}, {"X-Request-Id", "json-" + std::to_string(rows)}}};
}

// The binary tensor extension in and out.
Request BinaryInfer(int64_t rows) {
  const std::vector<float> values = RandomRows(rows);
  const std::string json =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + std::to_string(rows) +
      ",16],\"parameters\":{\"binary_data_size\":" + std::to_string(values.size() * 4) +
      "}}],\"parameters\":{\"binary_data_output\":true}}";
  std::string body = json;
  body.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return {"binary " + std::to_string(rows) + " rows",
          "POST",
          "/v2/models/tiny/infer",
          body,
          {{"Content-Type", "application/octet-stream"},
           {"Inference-Header-Content-Length", std::to_string(json.size())},
           {"X-Request-Id", "binary-" + std::to_string(rows)}}};
}

// Each request carries its own X-Request-Id and a W3C traceparent: the agent echoes the id, so
// answers through the forwarder and direct ones are byte for byte comparable.
std::vector<Request> Requests() {
  std::vector<Request> requests = {
      {"health", "GET", "/v2/health/ready", "", {}},
      {"metadata", "GET", "/v2/models/tiny", "", {}},
      JsonInfer(3),
      BinaryInfer(5),
      BinaryInfer(131072),  // 8 MiB of tensor in, 4 MiB out
      {"malformed JSON",
       "POST",
       "/v2/models/tiny/infer",
       "{\"inputs\": [ {",
       {{"Content-Type", "application/json"}}},
      {"unknown model",
       "POST",
       "/v2/models/nope/infer",
       "{}",
       {{"Content-Type", "application/json"}}},
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].headers["X-Request-Id"] = "fwd-" + std::to_string(i);
    requests[i].headers["traceparent"] =
        "00-0af7651916cd43dd8448eb211c80319" + std::to_string(i) + "-b7ad6b7169203331-01";
  }
  return requests;
}

// Sends `raw` on a new connection to 127.0.0.1:port and returns everything received until the
// server closes.
std::string RawExchange(uint16_t port, const std::string& raw) {
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  boost::system::error_code ec;
  socket.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return "connect: " + ec.message();
  net::write(socket, net::buffer(raw), ec);
  std::string received;
  std::vector<char> buf(64 << 10);
  while (!ec) received.append(buf.data(), socket.read_some(net::buffer(buf), ec));
  return received;
}

class ForwardIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("PACKRAT_LOG_LEVEL", "DEBUG", 1);  // the forwarder logs each connection
    socket_ = dir_ + "/agent.sock";
  }
  void TearDown() override {
    forwarder_.reset();
    agent_.reset();
  }

  // `server_extra`: more `server:` keys, each line indented by two spaces.
  void StartAgent(const std::string& server_extra = "") {
    agent_ = std::make_unique<AgentProcess>(PACKRAT_AGENT_PATH, TinyConfig(socket_, server_extra));
    ASSERT_TRUE(agent_->WaitUntilServing()) << agent_->Digest();
    ASSERT_TRUE(agent_->WaitForLog(" unix=" + socket_)) << agent_->Digest();
  }

  // Starts packrat-forward on 127.0.0.1:0 and reads its port from --port-file.
  void StartForwarder(const std::string& upstream) {
    const std::string port_file = dir_ + "/forward.json";
    std::filesystem::remove(port_file);
    std::string error;
    forwarder_ =
        ChildProcess::Start({PACKRAT_FORWARD_PATH, "--listen", "127.0.0.1:0", "--upstream",
                             upstream, "--port-file", port_file, "--shutdown-timeout-s", "60"},
                            &error);
    ASSERT_NE(forwarder_, nullptr) << error;
    const auto listening = forwarder_->WaitForLine(
        [](std::string_view line) { return line.find("listening on") != line.npos; },
        std::chrono::seconds(30));
    ASSERT_TRUE(listening.has_value()) << forwarder_->Output();
    std::stringstream text;
    text << std::ifstream(port_file).rdbuf();
    std::smatch m;
    const std::string s = text.str();
    ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(\{"listen":(\d+)\})"))) << s;
    forward_port_ = static_cast<uint16_t>(std::stoi(m[1]));
  }

  size_t ForwardedConnections() const {
    const std::string out = forwarder_->Output();
    size_t count = 0;
    for (size_t at = 0; (at = out.find("connection from", at)) != std::string::npos; ++at) {
      ++count;
    }
    return count;
  }

  testing::TempDir temp_{"packrat-fwd-it"};
  const std::string dir_ = temp_.path();
  std::string socket_;
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<ChildProcess> forwarder_;
  uint16_t forward_port_ = 0;
};

TEST_F(ForwardIntegrationTest, ResponsesAreByteIdenticalToDirectCalls) {
  StartAgent();
  StartForwarder("unix:" + socket_);
  for (const Request& r : Requests()) {
    const std::string direct = RawExchange(agent_->http_port(), r.Raw());
    const std::string via = RawExchange(forward_port_, r.Raw());
    ASSERT_EQ(direct.rfind("HTTP/1.1 ", 0), 0u) << r.name << ": " << direct.substr(0, 200);
    EXPECT_EQ(via.size(), direct.size()) << r.name;
    EXPECT_TRUE(via == direct) << r.name << ": " << via.substr(0, 300) << "\nvs\n"
                               << direct.substr(0, 300);
  }
  // The statuses the set covers, so a broken agent cannot make the test pass vacuously.
  EXPECT_EQ(RawExchange(forward_port_, BinaryInfer(131072).Raw()).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(RawExchange(forward_port_, Requests()[5].Raw()).substr(0, 12), "HTTP/1.1 400");
  EXPECT_EQ(RawExchange(forward_port_, Requests()[6].Raw()).substr(0, 12), "HTTP/1.1 404");
}

// The sidecar passes W3C traceparent and X-Request-Id through unchanged: the agent's access log
// names the client's request id and trace id, and the answer echoes the id.
TEST_F(ForwardIntegrationTest, TraceparentAndRequestIdPassThroughUnchanged) {
  const std::string log = dir_ + "/access.log";
  StartAgent("  access_log: json\n  access_log_path: " + log + "\n");
  StartForwarder("unix:" + socket_);
  HttpClient via("127.0.0.1", forward_port_);
  const Request r = JsonInfer(2);
  std::map<std::string, std::string> headers = r.headers;
  headers["X-Request-Id"] = "client-7";
  headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const HttpResult answer = via.Request(r.method, r.target, r.body, headers);
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.headers.at("x-request-id"), "client-7");
  std::stringstream lines;
  lines << std::ifstream(log).rdbuf();  // written before the answer was sent
  EXPECT_NE(lines.str().find("\"request_id\":\"client-7\",\"trace_id\":"
                             "\"4bf92f3577b34da6a3ce929d0e0e4736\",\"method\":\"POST\","
                             "\"path\":\"/v2/models/tiny/infer\",\"status\":200,"
                             "\"model\":\"tiny\",\"rows\":2,"),
            std::string::npos)
      << lines.str();
}

TEST_F(ForwardIntegrationTest, ManyRequestsShareOneKeepAliveConnection) {
  StartAgent();
  StartForwarder("unix:" + socket_);
  HttpClient direct(testing::UnixSocket{socket_});
  HttpClient via("127.0.0.1", forward_port_);
  for (int round = 0; round < 2; ++round) {
    for (const Request& r : Requests()) {
      const HttpResult a = direct.Request(r.method, r.target, r.body, r.headers);
      const HttpResult b = via.Request(r.method, r.target, r.body, r.headers);
      ASSERT_NE(a.status, 0) << r.name << ": " << a.error;
      EXPECT_EQ(b.status, a.status) << r.name << ": " << b.error;
      EXPECT_EQ(b.headers, a.headers) << r.name;
      EXPECT_TRUE(b.body == a.body) << r.name;
    }
  }
  EXPECT_EQ(ForwardedConnections(), 1u) << forwarder_->Output();
}

TEST_F(ForwardIntegrationTest, ForwardsOverTcpToo) {
  StartAgent();
  StartForwarder("tcp:127.0.0.1:" + std::to_string(agent_->http_port()));
  for (const Request& r : {JsonInfer(2), BinaryInfer(131072), Requests()[5]}) {
    EXPECT_TRUE(RawExchange(forward_port_, r.Raw()) == RawExchange(agent_->http_port(), r.Raw()))
        << r.name;
  }
}

// gRPC through the sidecar: HTTP/2 passes byte for byte to the agent's gRPC Unix socket
// (server.grpc_unix_socket), and the calls answer as they do straight.
TEST_F(ForwardIntegrationTest, GrpcPassesThroughToTheAgentsGrpcPort) {
  const std::string grpc_socket = dir_ + "/grpc.sock";
  StartAgent("  grpc: 127.0.0.1:0\n  grpc_unix_socket: " + grpc_socket + "\n");
  StartForwarder("unix:" + grpc_socket);
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(forward_port_), grpc::InsecureChannelCredentials()));
  const auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub->ServerReady(context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ModelMetadataRequest request;
  request.set_name("tiny");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(stub->ModelMetadata(context().get(), request, &metadata).ok());
  EXPECT_EQ(metadata.name(), "tiny");
  EXPECT_EQ(metadata.inputs(0).name(), "x");
  EXPECT_GE(ForwardedConnections(), 1u);
  // The agent gone, a call fails UNAVAILABLE (the forwarder's GOAWAY), which gRPC may retry.
  agent_->Stop(SIGTERM);
  inference::ServerLiveResponse live;
  const grpc::Status gone = stub->ServerLive(context().get(), {}, &live);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::UNAVAILABLE) << gone.error_message();
}

TEST_F(ForwardIntegrationTest, AgentNotRunningIsAnswered503WithAJsonError) {
  StartForwarder("unix:" + socket_);
  HttpClient client("127.0.0.1", forward_port_);
  const HttpResult r = client.Post("/v2/models/tiny/infer", JsonInfer(2).body);
  EXPECT_EQ(r.status, 503) << r.error;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.body, "{\"error\":\"packrat agent unreachable: connect to unix:" + socket_ +
                        ": No such file or directory\"}");
}

TEST_F(ForwardIntegrationTest, AgentThatStopsIsAnswered503) {
  StartAgent();
  StartForwarder("unix:" + socket_);
  HttpClient client("127.0.0.1", forward_port_);
  EXPECT_EQ(client.Get("/v2/health/live").status, 200);
  const auto status = agent_->Stop(SIGTERM);
  ASSERT_TRUE(status.has_value()) << agent_->Digest();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << agent_->Digest();
  EXPECT_FALSE(std::filesystem::exists(socket_));  // the agent removed its socket
  const HttpResult r = client.Get("/v2/health/live");
  EXPECT_EQ(r.status, 503) << r.error;
  EXPECT_NE(r.body.find("packrat agent unreachable"), std::string::npos) << r.body;
}

TEST_F(ForwardIntegrationTest, SigtermLetsOpenConnectionsFinishThenExitsZero) {
  StartAgent();
  StartForwarder("unix:" + socket_);
  auto client = std::make_unique<HttpClient>("127.0.0.1", forward_port_);
  ASSERT_EQ(client->Get("/v2/health/live").status, 200);
  kill(forwarder_->pid(), SIGTERM);
  ASSERT_TRUE(forwarder_
                  ->WaitForLine(
                      [](std::string_view line) { return line.find("not accepting") != line.npos; },
                      std::chrono::seconds(30))
                  .has_value())
      << forwarder_->Output();
  // New connections are refused; the open one still carries requests.
  EXPECT_EQ(HttpClient("127.0.0.1", forward_port_).Get("/v2/health/live").status, 0);
  const HttpResult r = client->Post("/v2/models/tiny/infer", JsonInfer(4).body);
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_FALSE(forwarder_->Wait(std::chrono::milliseconds(0)).has_value());
  client.reset();
  const auto status = forwarder_->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value()) << forwarder_->Output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << forwarder_->Output();
}

}  // namespace
}  // namespace packrat
