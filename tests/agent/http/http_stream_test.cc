// HttpServer's streamed responses (chunked bodies written piece by piece from another thread)
// and its notice that a client went away before its answer (HttpRequest::on_disconnect).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "agent/http/http_server.h"
#include "tests/support/http_client.h"

namespace packrat {
namespace {

using testing::HttpClient;
using testing::HttpResult;

// /stream/N: N pieces "piece-i;" from a thread of its own. /hold: never answers, but reports
// when the client goes away. Anything else: "ok".
class StreamingHandler : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder respond) override {
    if (request.target.rfind("/stream/", 0) == 0) {
      const int pieces = std::stoi(request.target.substr(8));
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.stream = [this, pieces](std::shared_ptr<HttpStream> stream) {
        threads_.emplace_back([this, stream, pieces] {
          bool open = true;
          for (int i = 0; open && (pieces < 0 || i < pieces); ++i) {
            open = stream->Write("piece-" + std::to_string(i) + ";");
            if (pieces < 0 && i > 100000) break;  // the client never left: give up
          }
          {
            std::lock_guard<std::mutex> lock(mu_);
            writer_saw_close_ = !open;
          }
          stream->Finish();
          cv_.notify_all();
        });
      };
      return respond(std::move(r));
    }
    if (request.target == "/keep-stream") {
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.stream = [this](std::shared_ptr<HttpStream> stream) {
        std::lock_guard<std::mutex> lock(mu_);
        kept_streams_.push_back(std::move(stream));
        cv_.notify_all();
      };
      return respond(std::move(r));
    }
    if (request.target == "/hold") {
      {
        std::lock_guard<std::mutex> lock(mu_);
        held_.push_back(respond);  // answered when the test ends
        cv_.notify_all();
      }
      request.on_disconnect([this] {
        std::lock_guard<std::mutex> lock(mu_);
        ++gone_;
        cv_.notify_all();
      });
      return;
    }
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = "ok";
    respond(std::move(r));
  }

  // Blocks until `n` disconnects were reported (false after 10 s).
  bool WaitGone(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return gone_ >= n; });
  }
  // Blocks until `held` /hold requests and `streams` /keep-stream streams are kept.
  bool WaitKept(size_t held, size_t streams) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return held_.size() >= held && kept_streams_.size() >= streams; });
  }
  // Writes to the kept streams, finishes them and lets them go; true if every write failed.
  bool WriteKeptStreamsAndRelease() {
    std::vector<std::shared_ptr<HttpStream>> streams;
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams.swap(kept_streams_);
    }
    bool all_failed = true;
    for (auto& s : streams) {
      all_failed = !s->Write("late;") && all_failed;
      s->Finish();
    }
    return all_failed;
  }
  bool WaitWriterSawClose() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return writer_saw_close_; });
  }
  // Answers the /hold requests (503); after the server stopped the answers are dropped.
  void AnswerHeld() {
    std::vector<HttpResponder> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (auto& respond : held) {
      HttpResponse r;
      r.status = 503;
      respond(std::move(r));
    }
  }
  ~StreamingHandler() override {
    for (auto& t : threads_) t.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int gone_ = 0;                                           // guarded by mu_
  bool writer_saw_close_ = false;                          // guarded by mu_
  std::vector<HttpResponder> held_;                        // guarded by mu_
  std::vector<std::shared_ptr<HttpStream>> kept_streams_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

class HttpStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.endpoint = {"127.0.0.1", 0};
    options.threads = 2;
    auto server = HttpServer::Create(options, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    server_->Start();
  }
  void TearDown() override {
    handler_.AnswerHeld();
    if (server_) server_->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }

  // A raw connection: sends `request` and returns the socket.
  int Send(const std::string& request) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    return fd;
  }
  static std::string Get(const std::string& target) {
    return "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
  }

  StreamingHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpStreamTest, StreamedBodyArrivesWholeAndTheConnectionIsKeptAlive) {
  HttpClient client("127.0.0.1", server_->port());
  const HttpResult r = client.Get("/stream/50");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(r.headers.at("transfer-encoding"), "chunked");
  std::string want;
  for (int i = 0; i < 50; ++i) want += "piece-" + std::to_string(i) + ";";
  EXPECT_EQ(r.body, want);
  EXPECT_EQ(client.Get("/plain").body, "ok");  // the same connection goes on
  EXPECT_EQ(client.Get("/stream/0").body, "");
}

// A handler may hold a responder or a stream past the server's end (the agent's generation
// streams finish on their own threads): using and dropping them then is safe and sends nothing.
// Under ASan this checks that no connection touches the destroyed server.
TEST_F(HttpStreamTest, RespondersAndStreamsMayOutliveTheServer) {
  const int held = Send(Get("/hold"));
  const int streamed = Send(Get("/keep-stream"));
  ASSERT_TRUE(handler_.WaitKept(1, 1));
  server_.reset();
  EXPECT_TRUE(handler_.WriteKeptStreamsAndRelease());
  handler_.AnswerHeld();
  close(held);
  close(streamed);
}

TEST_F(HttpStreamTest, AClientThatLeavesIsNoticedBeforeItsAnswer) {
  close(Send(Get("/hold")));
  EXPECT_TRUE(handler_.WaitGone(1));
  // On a kept-alive connection: the first request answered, the second one held.
  const int fd = Send(Get("/plain"));
  char buf[256];
  ASSERT_GT(read(fd, buf, sizeof(buf)), 0);
  ASSERT_EQ(write(fd, Get("/hold").data(), Get("/hold").size()),
            static_cast<ssize_t>(Get("/hold").size()));
  close(fd);  // the held request's bytes are in before the end of the stream
  EXPECT_TRUE(handler_.WaitGone(2));
}

TEST_F(HttpStreamTest, AStreamToAClientThatLeftReportsItToTheWriter) {
  const int fd = Send(Get("/stream/-1"));  // endless until a write fails
  char buf[4096];
  std::string got;
  while (got.find("piece-3;") == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_TRUE(handler_.WaitWriterSawClose());
  // The server goes on.
  EXPECT_EQ(HttpClient("127.0.0.1", server_->port()).Get("/plain").body, "ok");
}

}  // namespace
}  // namespace packrat
