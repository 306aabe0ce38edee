// HttpServer on a Unix domain socket: it serves the same handler as on TCP, replaces a stale
// socket file but never a live socket or another kind of file, makes the socket mode 0666 and
// removes it on Stop() (only if it is still its own). An answer to HEAD has no body, and a
// client that sends "Expect: 100-continue" is told to continue.
#include "agent/http/http_server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/http_client.h"
#include "tests/support/raw_connection.h"
#include "tests/support/stale_socket.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::HttpClient;
using testing::HttpResult;
using testing::RawConnection;
using testing::UnixSocket;

// Answers "METHOD TARGET <body bytes>".
class EchoHandler : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder respond) override {
    HttpResponse response;
    response.content_type = "text/plain";
    response.body =
        request.method + " " + request.target + " " + std::to_string(request.body->size());
    respond(std::move(response));
  }
};

class HttpServerUnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = dir_ + "/agent.sock"; }

  StatusOr<std::unique_ptr<HttpServer>> Create(const std::string& path) {
    HttpServerOptions options;
    options.endpoint = {"127.0.0.1", 0};
    options.unix_socket = path;
    options.threads = 1;
    return HttpServer::Create(options, &handler_);
  }

  static void Stop(HttpServer& server) {
    server.Stop(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  }

  EchoHandler handler_;
  testing::TempDir temp_{"packrat-http"};
  const std::string dir_ = temp_.path();
  std::string path_;
};

TEST_F(HttpServerUnixSocketTest, ServesTheSameHandlerOnTheSocketAndTcp) {
  auto server = Create(path_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Start();

  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);

  HttpClient unix_client(UnixSocket{path_});
  for (int i = 0; i < 3; ++i) {  // keep-alive: one connection
    const HttpResult r = unix_client.Post("/v2/models/m/infer", std::string(1000 + i, 'x'));
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, "POST /v2/models/m/infer " + std::to_string(1000 + i));
    EXPECT_EQ(r.headers.at("content-type"), "text/plain");
    // How long the idle connection stays open (HttpServerOptions::idle_timeout, 60 s).
    EXPECT_EQ(r.headers.at("keep-alive"), "timeout=60");
  }
  HttpClient tcp_client("127.0.0.1", (*server)->port());
  EXPECT_EQ(tcp_client.Get("/v2/health/live").body, "GET /v2/health/live 0");

  Stop(**server);
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_EQ(HttpClient(UnixSocket{path_}).Get("/").status, 0);
}

TEST_F(HttpServerUnixSocketTest, ReplacesAStaleSocketFile) {
  ASSERT_TRUE(testing::MakeStaleUnixSocket(path_));
  ASSERT_TRUE(std::filesystem::is_socket(path_));

  auto server = Create(path_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Start();
  EXPECT_EQ(HttpClient(UnixSocket{path_}).Get("/x").body, "GET /x 0");
}

TEST_F(HttpServerUnixSocketTest, RefusesASocketAnotherServerListensOn) {
  auto first = Create(path_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  (*first)->Start();
  auto second = Create(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("another process listens there"), std::string::npos)
      << second.status().message();
  // The first server still owns and serves its socket.
  EXPECT_EQ(HttpClient(UnixSocket{path_}).Get("/still").body, "GET /still 0");
}

TEST_F(HttpServerUnixSocketTest, RefusesAFileThatIsNotASocket) {
  std::ofstream(path_) << "data";
  auto server = Create(path_);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kFailedPrecondition);
  std::ifstream in(path_);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "data");
}

TEST_F(HttpServerUnixSocketTest, RejectsAPathTooLongForASocketAddress) {
  auto server = Create(dir_ + "/" + std::string(kMaxUnixSocketPath, 'a'));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpServerUnixSocketTest, StopLeavesASuccessorsSocketAlone) {
  auto old_server = Create(path_);
  ASSERT_TRUE(old_server.ok()) << old_server.status().ToString();
  (*old_server)->Start();
  // A successor took the path over (here: after the old file was removed by hand).
  ASSERT_EQ(unlink(path_.c_str()), 0);
  auto successor = Create(path_);
  ASSERT_TRUE(successor.ok()) << successor.status().ToString();
  (*successor)->Start();

  Stop(**old_server);
  EXPECT_TRUE(std::filesystem::is_socket(path_));
  EXPECT_EQ(HttpClient(UnixSocket{path_}).Get("/new").body, "GET /new 0");
}

TEST_F(HttpServerUnixSocketTest, AnswersHeadWithTheHeadersOnlyAndKeepsTheConnection) {
  auto server = Create(path_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Start();
  HttpClient client(UnixSocket{path_});
  HttpResult head = client.Request("HEAD", "/v2");
  EXPECT_EQ(head.status, 200) << head.error;
  EXPECT_EQ(head.headers["content-length"], std::to_string(std::string("HEAD /v2 0").size()));
  EXPECT_EQ(head.body, "");
  // Body bytes after the headers would be read as this answer's start.
  HttpResult get = client.Get("/next");
  EXPECT_EQ(get.status, 200) << get.error;
  EXPECT_EQ(get.body, "GET /next 0");
  Stop(**server);
}

TEST_F(HttpServerUnixSocketTest, TellsAClientThatExpectsItToContinue) {
  constexpr std::chrono::seconds kWait{10};
  HttpServerOptions options;
  options.endpoint = {"127.0.0.1", 0};
  options.threads = 1;
  options.max_body_bytes = 1000;
  auto server = HttpServer::Create(options, &handler_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Start();
  RawConnection c((*server)->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
             "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(c.ReadUntil("\r\n\r\n", kWait), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send("hello"));
  const std::string answer = c.ReadUntil("POST /a 5", kWait);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("POST /a 5"), std::string::npos) << answer;
  // Without the header the body simply follows, on the same connection.
  ASSERT_TRUE(c.Send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"));
  EXPECT_NE(c.ReadUntil("POST /b 3", kWait).find("HTTP/1.1 200 OK"), std::string::npos);
  // A body over the limit is refused before the client sends it.
  RawConnection big((*server)->port());
  ASSERT_TRUE(
      big.Send("POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
               "Expect: 100-continue\r\n\r\n"));
  const std::string refused = big.ReadUntil("bytes", kWait);
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  Stop(**server);
}

}  // namespace
}  // namespace packrat

namespace packrat {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every answer carries X-Request-Id: the client's where usable, else a generated one; with an
// access log, its line is written before the answer goes out (so a client holding its answer
// finds the line), with the trace id of a W3C traceparent.
TEST(HttpServerAccessTest, RequestIdsAreEchoedOrMadeAndEachAnswerIsLogged) {
  testing::TempDir dir("packrat-access");
  auto log = AccessLog::Open(AccessLog::Format::kJson, dir.path() + "/access.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  class Handler : public HttpHandler {
   public:
    void Handle(HttpRequest request, HttpResponder respond) override {
      HttpResponse r;
      r.body = "{\"id\":\"" + request.request_id + "\"}";
      r.access.model = "m";
      r.access.rows = 3;
      r.access.queue_ms = 1.5;
      r.access.compute_ms = 2.25;
      respond(std::move(r));
    }
  } handler;
  HttpServerOptions options;
  options.endpoint = {"127.0.0.1", 0};
  options.threads = 1;
  options.access_log = log->get();
  auto server = HttpServer::Create(options, &handler);
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->Start();
  HttpClient client("127.0.0.1", (*server)->port());

  const HttpResult mine =
      client.Post("/v2/models/m/infer?token=secret", "{}",
                  {{"X-Request-Id", "req-42"},
                   {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}});
  EXPECT_EQ(mine.headers.at("x-request-id"), "req-42");
  EXPECT_EQ(mine.body, "{\"id\":\"req-42\"}");
  const HttpResult made = client.Get("/v2/health/live");
  const std::string id = made.headers.at("x-request-id");
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  const HttpResult quoted = client.Request("GET", "/x", "", {{"X-Request-Id", "a\"b"}});
  EXPECT_NE(quoted.headers.at("x-request-id"), "a\"b");  // unusable: replaced

  const std::string lines = ReadFile(dir.path() + "/access.log");
  EXPECT_NE(lines.find("\"listener\":\"http\",\"request_id\":\"req-42\","
                       "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\","
                       "\"method\":\"POST\",\"path\":\"/v2/models/m/infer\",\"status\":200,"
                       "\"model\":\"m\",\"rows\":3,"),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("\"queue_ms\":1.500,\"compute_ms\":2.250,\"bytes_in\":2,"),
            std::string::npos)
      << lines;
  EXPECT_EQ(lines.find("secret"), std::string::npos) << "query strings are not logged";
  EXPECT_NE(lines.find("\"request_id\":\"" + id + "\""), std::string::npos) << lines;
  (*server)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(10));
}

TEST(AccessLogTest, LogfmtQuotesOnlyWhatNeedsIt) {
  auto log = AccessLog::Open(AccessLog::Format::kLogfmt, "-");
  ASSERT_TRUE(log.ok());
  AccessLogEntry e;
  e.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764028800123));
  e.listener = "management";
  e.request_id = "abc";
  e.method = "POST";
  e.path = "/v2/repository/models/a b/load";
  e.status = 404;
  e.duration_ms = 0.5;
  EXPECT_EQ((*log)->Format(e),
            "time=2025-11-25T00:00:00.123Z listener=management request_id=abc method=POST "
            "path=\"/v2/repository/models/a b/load\" status=404 duration_ms=0.500 bytes_in=0 "
            "bytes_out=0\n");
}

TEST(AccessLogTest, TraceIdsAndRequestIds) {
  EXPECT_EQ(TraceIdOf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(TraceIdOf("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "");
  EXPECT_EQ(TraceIdOf("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), "");
  EXPECT_EQ(TraceIdOf("garbage"), "");
  EXPECT_TRUE(UsableRequestId("0f8fad5b-d9cb-469f-a165-70867728950e"));
  EXPECT_FALSE(UsableRequestId(""));
  EXPECT_FALSE(UsableRequestId(std::string(129, 'a')));
  EXPECT_FALSE(UsableRequestId("with space"));
  EXPECT_NE(NewRequestId(), NewRequestId());
}

}  // namespace
}  // namespace packrat
