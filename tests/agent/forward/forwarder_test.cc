// Forwarder in process, in front of an HttpServer (on a Unix socket or TCP) with a fake handler:
// bytes pass both ways untouched (keep-alive, large bodies, error statuses, half-close), an
// unreachable upstream is answered 503 with a JSON error, and Shutdown() lets open connections
// finish but closes them at its deadline.
#include "agent/forward/forwarder.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/http/http_server.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

namespace net = boost::asio;
using testing::HttpClient;
using testing::HttpResult;
using testing::UnixSocket;

// POST /echo answers the body itself; /status/N answers status N with a JSON error; anything
// else "METHOD TARGET <body bytes>".
class FakeAgent : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder respond) override {
    HttpResponse response;
    if (request.target == "/echo") {
      response.content_type = "application/octet-stream";
      response.body = *request.body;
    } else if (request.target.rfind("/status/", 0) == 0) {
      response.status = std::stoi(request.target.substr(8));
      response.body = "{\"error\":\"status " + std::to_string(response.status) + "\"}";
    } else {
      response.content_type = "text/plain";
      response.body =
          request.method + " " + request.target + " " + std::to_string(request.body->size());
    }
    respond(std::move(response));
  }
};

std::string RandomBytes(size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Sends `request` on a new TCP connection, half-closes it if `shutdown_send`, and returns every
// byte received until the peer closes.
std::string RawExchange(uint16_t port, const std::string& request, bool shutdown_send) {
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  boost::system::error_code ec;
  socket.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return "connect: " + ec.message();
  net::write(socket, net::buffer(request), ec);
  if (shutdown_send) socket.shutdown(net::socket_base::shutdown_send, ec);
  std::string received;
  char buf[4096];
  while (true) {
    const size_t n = socket.read_some(net::buffer(buf), ec);
    received.append(buf, n);
    if (ec) break;
  }
  return received;
}

class ForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override { socket_path_ = dir_ + "/agent.sock"; }
  void TearDown() override {
    forwarder_.reset();
    agent_.reset();
  }

  // The fake agent on TCP port 0 and on socket_path_.
  void StartAgent() {
    HttpServerOptions options;
    options.endpoint = {"127.0.0.1", 0};
    options.unix_socket = socket_path_;
    options.threads = 1;
    auto server = HttpServer::Create(options, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    agent_ = std::move(server).value();
    agent_->Start();
  }

  void StartForwarder(const std::string& upstream) {
    ForwarderOptions options;
    options.listen = {"127.0.0.1", 0};
    auto parsed = ParseUpstream(upstream);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    options.upstream = *parsed;
    auto forwarder = Forwarder::Create(options);
    ASSERT_TRUE(forwarder.ok()) << forwarder.status().ToString();
    forwarder_ = std::move(forwarder).value();
    forwarder_->Start();
  }

  // Several requests on one connection through the forwarder equal the same requests sent
  // straight to the agent's Unix socket: status, every header, body.
  void ExpectSameAsDirect() {
    HttpClient direct(UnixSocket{socket_path_});
    HttpClient forwarded("127.0.0.1", forwarder_->port());
    const std::string big = RandomBytes(3 << 20);
    const struct {
      std::string method, target, body;
    } requests[] = {{"GET", "/v2/health/live", ""}, {"POST", "/echo", "{\"inputs\":[]}"},
                    {"POST", "/echo", big},         {"POST", "/status/400", "{"},
                    {"GET", "/status/404", ""},     {"POST", "/v2/models/m/infer", big}};
    int n = 0;
    for (const auto& r : requests) {
      // Its own X-Request-Id, which the agent echoes (else each answer carries a fresh one).
      const std::map<std::string, std::string> id = {{"X-Request-Id", "r" + std::to_string(n++)}};
      const HttpResult a = direct.Request(r.method, r.target, r.body, id);
      const HttpResult b = forwarded.Request(r.method, r.target, r.body, id);
      ASSERT_NE(a.status, 0) << a.error;
      EXPECT_EQ(b.status, a.status) << r.target << ": " << b.error;
      EXPECT_EQ(b.headers, a.headers) << r.target;
      EXPECT_TRUE(b.body == a.body) << r.target << ": bodies differ";
    }
    EXPECT_EQ(forwarder_->open_connections(), 1u);  // keep-alive: all on one connection
  }

  FakeAgent handler_;
  std::unique_ptr<HttpServer> agent_;
  std::unique_ptr<Forwarder> forwarder_;
  testing::TempDir temp_{"packrat-fwd"};
  const std::string dir_ = temp_.path();
  std::string socket_path_;
};

TEST(ParseUpstreamTest, AcceptsUnixAndTcp) {
  auto unix = ParseUpstream("unix:/run/packrat/agent.sock");
  ASSERT_TRUE(unix.ok());
  EXPECT_EQ(unix->kind, ForwardUpstream::Kind::kUnix);
  EXPECT_EQ(unix->path, "/run/packrat/agent.sock");
  EXPECT_EQ(unix->ToString(), "unix:/run/packrat/agent.sock");
  auto tcp = ParseUpstream("tcp:10.0.0.7:8080");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->kind, ForwardUpstream::Kind::kTcp);
  EXPECT_EQ(tcp->tcp.host, "10.0.0.7");
  EXPECT_EQ(tcp->tcp.port, 8080);
  auto v6 = ParseUpstream("tcp:[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->tcp.host, "::1");
  EXPECT_EQ(v6->ToString(), "tcp:[::1]:80");
}

TEST(ParseUpstreamTest, RejectsMalformedText) {
  for (const std::string& text : std::vector<std::string>{
           "", "unix:", "tcp:", "tcp:host", "tcp:host:0", "tcp:host:99999", "http://x:80",
           "/run/packrat/agent.sock", "unix:/" + std::string(kMaxUnixSocketPath, 'a')}) {
    auto parsed = ParseUpstream(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST_F(ForwarderTest, ForwardsToAUnixSocketUnchanged) {
  StartAgent();
  StartForwarder("unix:" + socket_path_);
  ExpectSameAsDirect();
}

TEST_F(ForwarderTest, ForwardsToTcpUnchanged) {
  StartAgent();
  StartForwarder("tcp:127.0.0.1:" + std::to_string(agent_->port()));
  ExpectSameAsDirect();
}

TEST_F(ForwarderTest, RawBytesAreIdenticalAndAHalfCloseStillGetsItsAnswer) {
  StartAgent();
  StartForwarder("unix:" + socket_path_);
  const std::string body = RandomBytes(1 << 20);
  const std::string request =
      "POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: raw\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  // The client sends FIN right after its request; the agent still answers, then closes.
  const std::string via = RawExchange(forwarder_->port(), request, /*shutdown_send=*/true);
  const std::string direct = RawExchange(agent_->port(), request, /*shutdown_send=*/true);
  EXPECT_EQ(via.substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(via.size(), direct.size());
  EXPECT_TRUE(via == direct);
}

TEST_F(ForwarderTest, MissingSocketIsAnswered503WithAJsonError) {
  StartForwarder("unix:" + socket_path_);  // no agent
  HttpClient client("127.0.0.1", forwarder_->port());
  const HttpResult r = client.Get("/v2/health/ready");
  EXPECT_EQ(r.status, 503) << r.error;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_EQ(r.body, "{\"error\":\"packrat agent unreachable: connect to unix:" + socket_path_ +
                        ": No such file or directory\"}");
}

// A gRPC client speaks HTTP/2 from its first byte: an HTTP/1.1 503 would be a protocol error
// to it. It gets a GOAWAY that carries the reason, and no SETTINGS (its call fails
// UNAVAILABLE, which it may retry: ForwardIntegrationTest.GrpcPassesThroughToTheAgentsGrpcPort).
TEST_F(ForwarderTest, AnHttp2ClientOfAMissingAgentGetsAGoAwayWithTheReason) {
  StartForwarder("unix:" + socket_path_);  // no agent
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const std::string client_settings("\0\0\0\x04\0\0\0\0\0", 9);
  const std::string got =
      RawExchange(forwarder_->port(), preface + client_settings, /*shutdown_send=*/false);
  const std::string reason =
      "packrat agent unreachable: connect to unix:" + socket_path_ + ": No such file or directory";
  ASSERT_EQ(got.size(), 9 + 8 + reason.size()) << got;
  const size_t length = 8 + reason.size();
  EXPECT_EQ(static_cast<unsigned char>(got[0]), (length >> 16) & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(got[1]), (length >> 8) & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(got[2]), length & 0xff);
  EXPECT_EQ(got[3], '\x07');                          // GOAWAY
  EXPECT_EQ(got.substr(4, 5), std::string(5, '\0'));  // no flags, stream 0
  EXPECT_EQ(got.substr(9, 7), std::string(7, '\0'));  // last stream 0, and
  EXPECT_EQ(got[16], '\x07');                         // REFUSED_STREAM
  EXPECT_EQ(got.substr(17), reason);
}

TEST_F(ForwarderTest, RefusedTcpIsAnswered503AndTheWholeBodyIsConsumed) {
  // A bound port nobody listens on refuses connections (and no other test can take it).
  net::io_context ioc;
  net::ip::tcp::acceptor bound(ioc);
  bound.open(net::ip::tcp::v4());
  bound.bind({net::ip::make_address("127.0.0.1"), 0});
  const uint16_t port = bound.local_endpoint().port();
  StartForwarder("tcp:127.0.0.1:" + std::to_string(port));
  HttpClient client("127.0.0.1", forwarder_->port());
  // The forwarder reads only the head before answering; it then drains the 2 MB body, so the
  // client's blocking write completes and it reads the 503 instead of a reset.
  const HttpResult r = client.Post("/v2/models/m/infer", RandomBytes(2 << 20));
  EXPECT_EQ(r.status, 503) << r.error;
  EXPECT_EQ(r.body, "{\"error\":\"packrat agent unreachable: connect to tcp:127.0.0.1:" +
                        std::to_string(port) + ": Connection refused\"}");
}

TEST_F(ForwarderTest, RecoversWhenTheAgentComesBack) {
  StartForwarder("unix:" + socket_path_);
  EXPECT_EQ(HttpClient("127.0.0.1", forwarder_->port()).Get("/a").status, 503);
  StartAgent();
  EXPECT_EQ(HttpClient("127.0.0.1", forwarder_->port()).Get("/a").body, "GET /a 0");
}

TEST_F(ForwarderTest, ShutdownLetsOpenConnectionsFinish) {
  StartAgent();
  StartForwarder("unix:" + socket_path_);
  auto client = std::make_unique<HttpClient>("127.0.0.1", forwarder_->port());
  ASSERT_EQ(client->Get("/before").status, 200);
  const uint16_t port = forwarder_->port();

  std::atomic<bool> returned{false};
  std::thread stopper([&] {
    forwarder_->Shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(60));
    returned.store(true);
  });
  // The open connection keeps working while Shutdown() waits for it.
  EXPECT_EQ(client->Get("/during").body, "GET /during 0");
  EXPECT_FALSE(returned.load());
  client.reset();  // closing it ends the wait
  stopper.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(forwarder_->open_connections(), 0u);
  EXPECT_EQ(HttpClient("127.0.0.1", port).Get("/after").status, 0);
}

TEST_F(ForwarderTest, ShutdownClosesConnectionsLeftAtTheDeadline) {
  StartAgent();
  StartForwarder("unix:" + socket_path_);
  HttpClient client("127.0.0.1", forwarder_->port());
  ASSERT_EQ(client.Get("/before").status, 200);
  forwarder_->Shutdown(std::chrono::steady_clock::now());
  EXPECT_EQ(forwarder_->open_connections(), 0u);
  EXPECT_EQ(client.Get("/after").status, 0);
}

}  // namespace
}  // namespace packrat
