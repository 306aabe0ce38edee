// The decode loop (runtime/generation_loop.h) over a real segment, with the test playing the
// agent: a fake decoder whose next token depends only on the sequence's own history (kept in its
// cache slot, moved by MoveSlot), so batching, top-up and compaction must not change any
// sequence's output; then the real TorchScript decoder on the tiny GPT.
#include "runtime/generation_loop.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/datatype.h"
#include "gtest/gtest.h"
#include "runtime/decoder.h"
#include "shm/segment.h"

namespace packrat::runtime {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;

// Logits peak at a token that hashes the slot's cached history: any mix-up of slots (a wrong
// MoveSlot, a stale cache) changes the output.
class FakeDecoder : public Decoder {
 public:
  explicit FakeDecoder(int slots) : slots_(slots), history_(slots) {
    shape_ = {1, 1, 1, 64, 101};
    bias_.assign(101, 0.0f);
    logits_.resize(slots * 101);
  }
  const DecoderShape& shape() const override { return shape_; }
  int slots() const override { return slots_; }
  const float* bias() const override { return bias_.data(); }

  StatusOr<const float*> Prefill(const int64_t* ids, int64_t n, int slot) override {
    events.emplace_back('p', slot);
    history_[slot].assign(ids, ids + n);
    Peak(0, history_[slot]);
    return logits_.data();
  }
  StatusOr<const float*> Step(const int64_t* tokens, const int64_t* positions, int count) override {
    {
      std::unique_lock<std::mutex> lock(gate_mu_);
      gate_cv_.wait(lock, [&] { return steps_taken_ < steps_allowed_; });
      ++steps_taken_;
    }
    steps.push_back(count);
    events.emplace_back('s', count);
    for (int i = 0; i < count; ++i) {
      std::vector<int64_t>& h = history_[i];
      if (static_cast<int64_t>(h.size()) != positions[i]) {
        return Internal("slot " + std::to_string(i) + " holds " + std::to_string(h.size()) +
                        " positions, the step says " + std::to_string(positions[i]));
      }
      h.push_back(tokens[i]);
      Peak(i, h);
    }
    return logits_.data();
  }
  void MoveSlot(int from, int to, int64_t length) override {
    history_[to].assign(history_[from].begin(), history_[from].begin() + length);
  }

  // The token the fake produces after `history`.
  static int32_t Next(const std::vector<int64_t>& history) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    return static_cast<int32_t>(h % 101);
  }
  // The whole output of a sequence alone: `max_tokens` tokens unless a stop id comes first.
  static std::vector<int32_t> Alone(std::vector<int64_t> prompt, int max_tokens, int stop = -1) {
    std::vector<int32_t> out;
    while (static_cast<int>(out.size()) < max_tokens) {
      const int32_t t = Next(prompt);
      out.push_back(t);
      prompt.push_back(t);
      if (t == stop) break;
    }
    return out;
  }

  // Lets `n` more steps run (then Step blocks), or any number.
  void AllowSteps(int64_t n) {
    std::lock_guard<std::mutex> lock(gate_mu_);
    steps_allowed_ = steps_taken_ + n;
    gate_cv_.notify_all();
  }
  void AllowAllSteps() { AllowSteps(int64_t{1} << 60); }

  std::vector<int> steps;  // active sequences per step
  // In order: ('p', slot) for a prefill, ('s', count) for a step.
  std::vector<std::pair<char, int>> events;

 private:
  void Peak(int row, const std::vector<int64_t>& history) {
    float* l = logits_.data() + row * 101;
    for (int v = 0; v < 101; ++v) l[v] = static_cast<float>(v % 7) * 0.01f;
    l[Next(history)] = 50;
  }

  DecoderShape shape_;
  const int slots_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int64_t steps_taken_ = 0;                   // guarded by gate_mu_
  int64_t steps_allowed_ = int64_t{1} << 60;  // guarded by gate_mu_
  std::vector<std::vector<int64_t>> history_;
  std::vector<float> bias_, logits_;
};

// The agent's side: sends sequences, collects tokens until every sequence ended.
class GenerationLoopTest : public ::testing::Test {
 protected:
  // Keeps `decoder` until the loop that uses it has ended.
  template <typename D>
  D* Own(std::unique_ptr<D> decoder) {
    D* raw = decoder.get();
    owned_.push_back(std::move(decoder));
    return raw;
  }

  // Creates the segment and starts the loop on it, unless `later` (then RunLoop() starts it).
  void Start(Decoder* decoder, RefillPolicy refill, uint32_t prompt_slots = 4, bool later = false) {
    decoder_ = decoder;
    refill_ = refill;
    shm::SegmentOptions o;
    o.num_slots = prompt_slots;
    o.ring_capacity = 64;
    o.slot_input_bytes = 4096;
    o.slot_output_bytes = 64;
    auto seg = shm::Segment::Create(shm::Segment::MakeName(getpid(), "generation_test"), o);
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    segment_ = std::move(seg).value();
    if (!later) RunLoop();
  }
  void RunLoop() {
    thread_ = std::thread([this] {
      GenerationOptions g;
      g.refill = refill_;
      g.poll_interval = std::chrono::milliseconds(50);
      GenerationLoop loop(segment_.get(), decoder_, g);
      status_ = loop.Run();
    });
  }
  void TearDown() override {
    if (segment_) segment_->requests().Close();
    if (thread_.joinable()) thread_.join();
  }
  // Ends this loop and forgets what it produced, for another round in the same test.
  void Restart() {
    TearDown();
    segment_.reset();
    tokens_.clear();
    finished_.clear();
    cancelled_.clear();
    failed_.clear();
    busy_slots_.clear();
  }

  // Sends sequence `id` through prompt slot `slot`, once the runtime took the slot's last prompt.
  void Send(uint64_t id, uint32_t slot, const std::vector<int64_t>& prompt, uint32_t max_tokens,
            uint32_t top_k = 1, std::vector<int32_t> stops = {}) {
    shm::CompletionMessage c;
    while (busy_slots_.count(slot) != 0) {
      ASSERT_TRUE(segment_->completions().Pop(&c, std::chrono::seconds(10)).ok());
      Handle(c);
    }
    busy_slots_.insert(slot);
    std::memcpy(segment_->input_slab(slot), prompt.data(), prompt.size() * 8);
    shm::BatchMessage m;
    std::memset(&m, 0, sizeof(m));
    m.batch_id = id;
    m.slot = slot;
    m.flags = shm::kGenerateStart;
    m.num_tensors = 1;
    m.tensors[0].datatype = static_cast<uint8_t>(DataType::kInt64);
    m.tensors[0].ndim = 1;
    m.tensors[0].shape[0] = static_cast<int64_t>(prompt.size());
    m.tensors[0].byte_size = prompt.size() * 8;
    m.generate.max_tokens = max_tokens;
    m.generate.top_k = top_k;
    m.generate.temperature = 1;
    m.generate.seed = id;
    m.generate.num_stop_ids = static_cast<uint32_t>(stops.size());
    for (size_t i = 0; i < stops.size(); ++i) m.generate.stop_ids[i] = stops[i];
    ASSERT_TRUE(segment_->requests().Push(m, std::chrono::seconds(5)).ok());
  }
  void CancelSequence(uint64_t id) {
    shm::BatchMessage m;
    std::memset(&m, 0, sizeof(m));
    m.batch_id = id;
    m.flags = shm::kGenerateCancel;
    ASSERT_TRUE(segment_->requests().Push(m, std::chrono::seconds(5)).ok());
  }

  // Pops completions until `ended` sequences have ended (or a timeout).
  void Collect(size_t ended, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    shm::CompletionMessage m;
    while (finished_.size() + cancelled_.size() + failed_.size() < ended &&
           std::chrono::steady_clock::now() < deadline) {
      if (!segment_->completions().Pop(&m, std::chrono::milliseconds(100)).ok()) continue;
      Handle(m);
    }
  }
  void Handle(const shm::CompletionMessage& m) {
    if (m.kind == shm::CompletionKind::kAccepted) {
      busy_slots_.erase(m.slot);
    } else if (m.kind == shm::CompletionKind::kSequenceFailed) {
      failed_[m.batch_id] = m.error;
    } else if (m.kind == shm::CompletionKind::kTokens) {
      for (uint32_t i = 0; i < m.rows; ++i) {
        const shm::StepToken& t = m.tokens[i];
        ASSERT_EQ(finished_.count(t.sequence_id) + cancelled_.count(t.sequence_id), 0u)
            << "a token after sequence " << t.sequence_id << " ended";
        if (t.flags & shm::kTokenCancelled) {
          cancelled_.insert(t.sequence_id);
          continue;
        }
        tokens_[t.sequence_id].push_back(t.token);
        if (t.flags & shm::kTokenFinished) finished_.insert(t.sequence_id);
      }
    }
  }

  std::vector<std::unique_ptr<Decoder>> owned_;  // destroyed after TearDown() joined the loop
  Decoder* decoder_ = nullptr;
  RefillPolicy refill_ = RefillPolicy::kHalf;
  std::unique_ptr<shm::Segment> segment_;
  std::thread thread_;
  Status status_;
  std::map<uint64_t, std::vector<int32_t>> tokens_;
  std::set<uint64_t> finished_, cancelled_;
  std::set<uint32_t> busy_slots_;  // prompt slots the runtime has not taken yet
  std::map<uint64_t, std::string> failed_;
};

std::vector<int64_t> Prompt(int i) { return {i % 101, (3 * i + 1) % 101, (7 * i + 2) % 101}; }

TEST_F(GenerationLoopTest, TopUpOutputsEqualEachSequenceAlone) {
  for (RefillPolicy refill : {RefillPolicy::kHalf, RefillPolicy::kStep, RefillPolicy::kStatic}) {
    SCOPED_TRACE(static_cast<int>(refill));
    FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(4));
    Start(&decoder, refill);
    // Ten sequences of very different lengths through four decode slots.
    for (int i = 0; i < 10; ++i) Send(100 + i, i % 4, Prompt(i), 1 + (i * 7) % 19);
    Collect(10);
    ASSERT_EQ(finished_.size(), 10u) << "every sequence finished (none starved)";
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(tokens_[100 + i], FakeDecoder::Alone(Prompt(i), 1 + (i * 7) % 19)) << i;
    }
    EXPECT_TRUE(failed_.empty());
    Restart();
  }
}

TEST_F(GenerationLoopTest, RefillPoliciesAdmitAsDocumented) {
  // Four decode slots; one sequence of 12 tokens and seven of 3, all waiting before the loop
  // starts. Static: the 12-token one runs on alone once the others ended, and nobody joins it;
  // top-up: waiting sequences join while it runs.
  for (RefillPolicy refill : {RefillPolicy::kStatic, RefillPolicy::kHalf, RefillPolicy::kStep}) {
    FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(4));
    Start(&decoder, refill, /*prompt_slots=*/8, /*later=*/true);
    Send(1, 0, Prompt(1), 12);
    for (int i = 2; i < 9; ++i) Send(i, static_cast<uint32_t>(i - 1), Prompt(i), 3);
    RunLoop();
    Collect(8);
    ASSERT_EQ(finished_.size(), 8u);
    const auto events = decoder.events;
    Restart();
    // Top-ups: prefills into a slot above 0 right after a step (joining a running batch).
    int topups = 0;
    for (size_t k = 1; k < events.size(); ++k) {
      if (events[k].first == 'p' && events[k].second > 0 && events[k - 1].first == 's') ++topups;
    }
    if (refill == RefillPolicy::kStatic) {
      EXPECT_EQ(topups, 0) << "static batching never adds to a running batch";
    } else {
      EXPECT_GT(topups, 0) << "top-up refilled the running batch";
    }
    if (refill == RefillPolicy::kHalf) {
      // A top-up happens only with at least two of the four slots free.
      for (size_t k = 1; k < events.size(); ++k) {
        if (events[k].first == 'p' && events[k - 1].first == 's') {
          EXPECT_LE(events[k].second, 2) << "event " << k;
        }
      }
    }
  }
}

TEST_F(GenerationLoopTest, TheAgentsSlotLimitBoundsTheBatch) {
  // Four decode slots held to two by the agent: six waiting sequences run at most two a step,
  // each with the tokens it has alone; with the limit lifted all four slots fill again.
  for (uint32_t limit : {2u, 0u}) {
    FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(4));
    Start(&decoder, RefillPolicy::kStep, /*prompt_slots=*/8, /*later=*/true);
    segment_->header()->decode_slots_limit.store(limit);
    for (int i = 1; i <= 6; ++i) Send(i, static_cast<uint32_t>(i - 1), Prompt(i), 3);
    RunLoop();
    Collect(6);
    ASSERT_EQ(finished_.size(), 6u);
    for (int i = 1; i <= 6; ++i) EXPECT_EQ(tokens_[i], FakeDecoder::Alone(Prompt(i), 3)) << i;
    const int widest = *std::max_element(decoder.steps.begin(), decoder.steps.end());
    EXPECT_EQ(widest, limit == 0 ? 4 : 2) << "limit " << limit;
    Restart();
  }
}

TEST_F(GenerationLoopTest, CancellingFreesTheSlotAndStopsTheTokens) {
  FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(1));
  decoder.AllowSteps(3);  // sequence 1 gets its first tokens, then the decoder holds
  Start(&decoder, RefillPolicy::kHalf);
  Send(1, 0, Prompt(1), 60);  // long; holds the only slot
  Send(2, 1, Prompt(2), 5);   // waits for it
  shm::CompletionMessage m;
  while (tokens_[1].size() < 4) {  // the prefill's token and three steps'
    ASSERT_TRUE(segment_->completions().Pop(&m, std::chrono::seconds(10)).ok());
    Handle(m);
  }
  CancelSequence(1);
  CancelSequence(99);  // unknown: ignored
  decoder.AllowAllSteps();
  Collect(2);
  EXPECT_EQ(cancelled_.count(1), 1u);
  EXPECT_LE(tokens_[1].size(), 5u);  // at most the step already under way
  EXPECT_EQ(finished_.count(2), 1u);
  EXPECT_EQ(tokens_[2], FakeDecoder::Alone(Prompt(2), 5));
  // A sequence cancelled while still waiting never decodes.
  decoder.AllowSteps(0);
  Send(3, 0, Prompt(3), 50);
  Send(4, 1, Prompt(4), 50);
  CancelSequence(4);
  decoder.AllowAllSteps();
  Collect(4);
  EXPECT_EQ(cancelled_.count(4), 1u);
  EXPECT_EQ(tokens_.count(4), 0u);
}

TEST_F(GenerationLoopTest, StopIdsAndBadSequences) {
  FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(2));
  Start(&decoder, RefillPolicy::kStep);
  const std::vector<int32_t> alone = FakeDecoder::Alone(Prompt(5), 30);
  const int32_t stop = alone[4];
  Send(1, 0, Prompt(5), 30, 1, {stop});
  Send(2, 1, std::vector<int64_t>(70, 1), 5);  // longer than max_len - 1 = 63
  Send(3, 0, {1, 500}, 5);                     // a token id beyond the vocabulary
  Collect(3);
  const auto first_stop = std::find(alone.begin(), alone.end(), stop) - alone.begin();
  EXPECT_EQ(tokens_[1], std::vector<int32_t>(alone.begin(), alone.begin() + first_stop + 1));
  ASSERT_EQ(failed_.count(2), 1u);
  EXPECT_NE(failed_[2].find("prompt needs 1 to 63 tokens"), std::string::npos) << failed_[2];
  ASSERT_EQ(failed_.count(3), 1u);
  EXPECT_NE(failed_[3].find("token ids"), std::string::npos);
}

TEST_F(GenerationLoopTest, SequencesEndAtTheModelsLastPosition) {
  FakeDecoder& decoder = *Own(std::make_unique<FakeDecoder>(1));  // max_len 64
  Start(&decoder, RefillPolicy::kHalf);
  Send(1, 0, std::vector<int64_t>(60, 3), 100);
  Collect(1);
  ASSERT_EQ(finished_.count(1), 1u);
  // The prefill's token, then one per step feeding positions 60..63; the last is not fed back.
  EXPECT_EQ(tokens_[1].size(), 5u);
}

TEST_F(GenerationLoopTest, RealTinyGptTopUpEqualsAlone) {
  auto decoder_or = LoadTorchDecoder(kModels + "/tiny_gpt.pt", 1, 4);
  ASSERT_TRUE(decoder_or.ok()) << decoder_or.status().ToString();
  Decoder* decoder = Own(std::move(decoder_or).value());
  EXPECT_EQ(decoder->shape().vocab, 512);
  EXPECT_EQ(decoder->shape().max_len, 128);
  // Each sequence alone first (one slot used at a time), then all together with top-up.
  Start(decoder, RefillPolicy::kStep);
  std::map<uint64_t, std::vector<int32_t>> alone;
  for (int i = 0; i < 8; ++i) {
    std::vector<int64_t> prompt = {i, 2 * i + 1, 40 + i, 7};
    Send(10 + i, 0, prompt, 5 + 4 * i);
    Collect(static_cast<size_t>(i + 1));
    ASSERT_EQ(finished_.count(10 + i), 1u);
    alone[i] = tokens_[10 + i];
  }
  tokens_.clear();
  finished_.clear();
  for (int i = 0; i < 8; ++i) {
    std::vector<int64_t> prompt = {i, 2 * i + 1, 40 + i, 7};
    Send(20 + i, static_cast<uint32_t>(i % 4), prompt, 5 + 4 * i);
  }
  Collect(8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(tokens_[20 + i], alone[i]) << "sequence " << i;
    EXPECT_EQ(tokens_[20 + i].size(), static_cast<size_t>(5 + 4 * i));
  }
}

// A step padded with filler rows (here to all four slots) computes the real rows as the
// unpadded step does, step after step: the fillers write only free slots' caches.
TEST(TorchDecoderTest, RealTinyGptPaddedStepsLeaveTheRealRowsAlone) {
  auto plain_or = LoadTorchDecoder(kModels + "/tiny_gpt.pt", 1, 4, StepPadding::kNone);
  ASSERT_TRUE(plain_or.ok()) << plain_or.status().ToString();
  auto padded_or = LoadTorchDecoder(kModels + "/tiny_gpt.pt", 1, 4, StepPadding::kToSlots);
  ASSERT_TRUE(padded_or.ok()) << padded_or.status().ToString();
  Decoder& plain = **plain_or;
  Decoder& padded = **padded_or;
  const int64_t vocab = plain.shape().vocab;
  const std::vector<std::vector<int64_t>> prompts = {{5, 9, 40, 7}, {1, 2}};
  std::vector<int64_t> tokens = {3, 4}, positions;
  for (int slot = 0; slot < 2; ++slot) {
    const auto& p = prompts[slot];
    ASSERT_TRUE(plain.Prefill(p.data(), static_cast<int64_t>(p.size()), slot).ok());
    ASSERT_TRUE(padded.Prefill(p.data(), static_cast<int64_t>(p.size()), slot).ok());
    positions.push_back(static_cast<int64_t>(p.size()));
  }
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto a = plain.Step(tokens.data(), positions.data(), 2);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const std::vector<float> expected(*a, *a + 2 * vocab);
    auto b = padded.Step(tokens.data(), positions.data(), 2);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    for (int64_t i = 0; i < 2 * vocab; ++i) {
      ASSERT_NEAR((*b)[i], expected[i], 1e-4 * (1 + std::abs(expected[i]))) << "logit " << i;
    }
    for (int row = 0; row < 2; ++row) {  // greedy: the next token fed back
      const float* r = expected.data() + row * vocab;
      tokens[row] = std::max_element(r, r + vocab) - r;
      ++positions[row];
    }
  }
}

}  // namespace
}  // namespace packrat::runtime
