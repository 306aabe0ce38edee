// The decode loop of a generative runtime (amun-topup-batching-paper §6.1): a decoding batch of
// up to slots() sequences (or the agent's SegmentHeader::decode_slots_limit, read before each
// refill), one token per sequence per step; finished sequences leave at once and queued ones
// are prefilled and join, by the refill policy (its "slots" being the limit):
//
//   kStatic  the standard mini-batching baseline (the paper's Algorithm 1): new sequences join
//            only when the batch has emptied
//   kHalf    top-up when at least half the slots are free (the paper's choice)
//   kStep    top-up at every step with any free slot
//
// Protocol (shm/layout.h): kGenerateStart messages bring sequences (prompt in a slot's input
// slab, copied at once and acknowledged with kAccepted so the agent can reuse the slot);
// kGenerateCancel ends one; every step's tokens go back in kTokens completions (at most
// kMaxStepTokens each), the last token of a sequence flagged kTokenFinished. Sequences wait in
// FIFO order, so none starves. Each token is picked by the fused output kernel
// (output_kernel.h): bias + softmax + top-k in one pass; greedy (top_k 1) skips the softmax.
//
// Failure policy: a bad sequence (prompt too long, malformed message) fails alone with
// kSequenceFailed; a failed decode step fails the sequences in it; the loop goes on. A closed
// ring or a dead agent ends the loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "common/status.h"
#include "runtime/decoder.h"
#include "shm/segment.h"

namespace packrat::runtime {

enum class RefillPolicy { kStatic, kHalf, kStep };

struct GenerationOptions {
  RefillPolicy refill = RefillPolicy::kHalf;
  pid_t agent_pid = 0;  // the loop ends when this process is no longer our parent
  // How often an idle loop checks the agent, sleeping on the ring's futex in between; at least
  // 1 ms (0 would busy-wait).
  std::chrono::milliseconds poll_interval{500};
};

class GenerationLoop {
 public:
  // Does not take ownership; both must outlive the loop.
  GenerationLoop(shm::Segment* segment, Decoder* decoder, GenerationOptions options);

  // Blocks decoding until the request ring is closed (OK) or the agent died (kUnavailable).
  Status Run();

 private:
  struct Sequence {
    uint64_t id = 0;
    std::vector<int64_t> prompt;
    shm::GenerateParams params{};
    int64_t position = 0;  // where the next input token goes (= tokens cached)
    int64_t last_token = 0;
    uint32_t generated = 0;
    bool cancelled = false;
    std::mt19937_64 rng;
  };

  bool AgentAlive() const;
  // Takes every message waiting on the request ring; blocks (up to the poll interval) only
  // when there is nothing to decode. False when the loop must end.
  bool Receive(bool block, Status* end);
  void Start(const shm::BatchMessage& msg);
  void Cancel(uint64_t id);
  // Prefills pending sequences into free slots, as the policy allows.
  void Admit();
  // One decode step of every active sequence, then compaction of the finished ones.
  void Step();
  // Picks the next token from `logits` (vocab floats, no bias).
  int32_t Sample(const float* logits, Sequence* s, float* prob);
  // Records the token and whether it ends the sequence.
  bool Emit(const Sequence& s, int32_t token, float prob);
  void EmitCancelled(uint64_t id);
  void Fail(uint64_t id, const std::string& why);
  void Flush();
  bool Push(const shm::CompletionMessage& msg);
  // Drops active slot i (finished or cancelled), moving the last active sequence into it.
  void Remove(size_t i);

  shm::Segment* const segment_;
  Decoder* const decoder_;
  const GenerationOptions options_;
  std::deque<Sequence> pending_;
  std::vector<Sequence> active_;  // active_[i] decodes in cache slot i
  shm::CompletionMessage out_;    // the kTokens message being filled
  uint64_t step_ns_ = 0;          // the last decode step's time and size, sent with its tokens
  int64_t step_rows_ = 0;
  bool alive_ = true;                        // false once a push found the agent gone
  std::vector<int64_t> tokens_, positions_;  // reused per step
  std::vector<int32_t> top_ids_;
  std::vector<float> top_probs_;
};

}  // namespace packrat::runtime
