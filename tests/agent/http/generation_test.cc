// Generation against a recording HttpStream: the order of a stream's events however the
// decoder's tokens and the stream's headers interleave, its end, and cancellation.
#include "agent/http/generation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace packrat {
namespace {

// Records what a stream is given. `accept` false: the client is gone (Write fails).
class RecordingStream : public HttpStream {
 public:
  bool Write(std::string data) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accept) return false;
    EXPECT_EQ(finishes_, 0) << "a write after Finish";
    pieces_.push_back(std::move(data));
    return true;
  }
  void Finish() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++finishes_;
  }
  std::string Body() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const auto& p : pieces_) all += p;
    return all;
  }
  size_t pieces() {
    std::lock_guard<std::mutex> lock(mu_);
    return pieces_.size();
  }
  int finishes() {
    std::lock_guard<std::mutex> lock(mu_);
    return finishes_;
  }
  std::atomic<bool> accept{true};

 private:
  std::mutex mu_;
  std::vector<std::string> pieces_;
  int finishes_ = 0;
};

// The "index" of every token event, in the order they were written.
std::vector<int> Indices(const std::string& body) {
  std::vector<int> out;
  const std::regex index(R"re("index":(\d+))re");
  for (std::sregex_iterator it(body.begin(), body.end(), index), end; it != end; ++it) {
    out.push_back(std::stoi((*it)[1]));
  }
  return out;
}

Generation Make() { return Generation("gpt", {7}, std::chrono::steady_clock::now(), nullptr); }

TEST(GenerationTest, TokensBeforeTheHeadersGoOutFirstThenEachInTurn) {
  Generation g = Make();
  g.Token(11, -1, false, true);
  g.Token(12, -1, false, true);
  auto stream = std::make_shared<RecordingStream>();
  g.Attach(stream);
  EXPECT_EQ(stream->pieces(), 1u);  // what waited goes out as one piece
  g.Token(13, -1, true, true);
  g.EndStream(Status::Ok());
  EXPECT_EQ(Indices(stream->Body()), (std::vector<int>{0, 1, 2}));
  EXPECT_NE(stream->Body().find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(stream->finishes(), 1);
}

TEST(GenerationTest, ASequenceThatEndedBeforeTheHeadersIsWrittenAndFinishedOnAttach) {
  Generation g = Make();
  g.Token(7, -1, true, true);  // a stop id
  g.EndStream(Status::Ok());
  auto stream = std::make_shared<RecordingStream>();
  g.Attach(stream);
  EXPECT_EQ(Indices(stream->Body()), (std::vector<int>{0}));
  EXPECT_NE(stream->Body().find("\"finish_reason\":\"stop\""), std::string::npos);
  EXPECT_EQ(stream->finishes(), 1);
}

TEST(GenerationTest, AFailureOrACancellationIsAnErrorEvent) {
  Generation failed = Make();
  auto a = std::make_shared<RecordingStream>();
  failed.Attach(a);
  failed.Token(1, -1, false, true);
  failed.EndStream(Internal("the runtime died"));
  EXPECT_NE(a->Body().find("event: error\ndata: {\"error\":\"the runtime died\"}"),
            std::string::npos)
      << a->Body();
  EXPECT_EQ(a->finishes(), 1);

  Generation cancelled = Make();
  auto b = std::make_shared<RecordingStream>();
  cancelled.Attach(b);
  cancelled.EndStream(Cancelled("the client cancelled the request"));
  EXPECT_EQ(b->Body(), "event: error\ndata: {\"error\":\"the client cancelled the request\"}\n\n");
  EXPECT_EQ(b->finishes(), 1);
}

TEST(GenerationTest, CancelRunsOnceWhoeverAsksAndWhenever) {
  Generation g = Make();
  int cancels = 0;
  g.Cancel();  // before the decoder handed out its cancel: kept for SetCancel
  g.Cancel();
  g.SetCancel([&] { ++cancels; });
  EXPECT_EQ(cancels, 1);
  auto stream = std::make_shared<RecordingStream>();
  stream->accept = false;  // the client left: every write fails
  g.Attach(stream);
  g.Token(1, -1, false, true);
  g.Token(2, -1, false, true);
  g.Cancel();
  EXPECT_EQ(cancels, 1);

  Generation h = Make();
  int h_cancels = 0;
  h.SetCancel([&] { ++h_cancels; });
  auto gone = std::make_shared<RecordingStream>();
  gone->accept = false;
  h.Attach(gone);
  for (int i = 0; i < 5; ++i) h.Token(i, -1, false, true);
  EXPECT_EQ(h_cancels, 1);

  // A disconnect noticed after the sequence ended: the cancel still runs once (the decoder
  // ignores an id it no longer has) and the finished stream is left as it is.
  Generation ended = Make();
  int ended_cancels = 0;
  ended.SetCancel([&] { ++ended_cancels; });
  auto stream2 = std::make_shared<RecordingStream>();
  ended.Attach(stream2);
  ended.Token(4, -1, true, true);
  ended.EndStream(Status::Ok());
  ended.Cancel();
  EXPECT_EQ(ended_cancels, 1);
  EXPECT_EQ(stream2->finishes(), 1);
  EXPECT_EQ(stream2->Body().find("event: error"), std::string::npos);
}

// Tokens from the decoder's thread while the session attaches the stream: every event goes
// out once, in order, whichever side wins each race.
TEST(GenerationTest, TokensRacingTheAttachStayInOrder) {
  for (int round = 0; round < 200; ++round) {
    Generation g = Make();
    auto stream = std::make_shared<RecordingStream>();
    std::thread decoder([&] {
      for (int i = 0; i < 50; ++i) g.Token(100 + i, -1, i == 49, true);
      g.EndStream(Status::Ok());
    });
    std::thread session([&] { g.Attach(stream); });
    decoder.join();
    session.join();
    std::vector<int> expected(50);
    for (int i = 0; i < 50; ++i) expected[i] = i;
    ASSERT_EQ(Indices(stream->Body()), expected) << "round " << round;
    ASSERT_EQ(stream->finishes(), 1) << "round " << round;
  }
}

TEST(GenerationTest, ResponseCarriesTheIdsAndWhyItStopped) {
  Generation g = Make();
  g.Token(3, 0.5f, false, false);
  g.Token(7, 0.5f, true, false);
  const std::string r = g.Response();
  EXPECT_NE(r.find("[3,7]"), std::string::npos) << r;
  EXPECT_NE(r.find("\"stop\""), std::string::npos) << r;
}

}  // namespace
}  // namespace packrat
