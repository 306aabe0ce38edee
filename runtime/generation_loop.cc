#include "runtime/generation_loop.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "runtime/batch_message.h"
#include "runtime/output_kernel.h"

namespace packrat::runtime {

GenerationLoop::GenerationLoop(shm::Segment* segment, Decoder* decoder, GenerationOptions options)
    : segment_(segment), decoder_(decoder), options_([&] {
        options.poll_interval = std::max(options.poll_interval, std::chrono::milliseconds(1));
        return options;
      }()) {
  std::memset(&out_, 0, sizeof(out_));
  out_.kind = shm::CompletionKind::kTokens;
  active_.reserve(decoder_->slots());
}

bool GenerationLoop::AgentAlive() const {
  return options_.agent_pid == 0 || getppid() == options_.agent_pid;
}

Status GenerationLoop::Run() {
  Status end;
  while (alive_) {
    if (!Receive(/*block=*/pending_.empty() && active_.empty(), &end)) return end;
    Admit();
    if (!active_.empty()) Step();
    out_.compute_ns = step_ns_;  // the timing goes with the step's last message
    out_.step_rows = step_rows_;
    Flush();
    step_ns_ = 0;
    step_rows_ = 0;
  }
  return Unavailable("agent exited");
}

bool GenerationLoop::Receive(bool block, Status* end) {
  shm::BatchMessage msg;
  if (block) {
    const Status popped = segment_->requests().Pop(&msg, options_.poll_interval);
    if (popped.code() == StatusCode::kDeadlineExceeded) {
      if (AgentAlive()) return true;
      *end = Unavailable("agent exited");
      return false;
    }
    if (!popped.ok()) {  // ring closed: orderly shutdown
      *end = Status::Ok();
      return false;
    }
    (msg.flags & shm::kGenerateCancel) ? Cancel(msg.batch_id) : Start(msg);
  }
  while (segment_->requests().TryPop(&msg)) {
    (msg.flags & shm::kGenerateCancel) ? Cancel(msg.batch_id) : Start(msg);
  }
  if (segment_->requests().closed()) {
    *end = Status::Ok();
    return false;
  }
  return true;
}

void GenerationLoop::Start(const shm::BatchMessage& msg) {
  std::vector<RawTensor> inputs;
  Status s = UnpackBatchMessage(
      msg, segment_->num_slots(), segment_->input_capacity(),
      [this](uint32_t slot) { return segment_->input_slab(slot); }, &inputs);
  Sequence seq;
  seq.id = msg.batch_id;
  seq.params = msg.generate;
  if (s.ok() && (!(msg.flags & shm::kGenerateStart) || inputs.size() != 1 ||
                 inputs[0].datatype != DataType::kInt64 || inputs[0].shape.size() != 1)) {
    s = InvalidArgument("a sequence needs one INT64 [L] prompt");
  }
  if (s.ok()) {
    const auto* ids = static_cast<const int64_t*>(inputs[0].data);
    seq.prompt.assign(ids, ids + inputs[0].shape[0]);
    const int64_t vocab = decoder_->shape().vocab;
    if (seq.prompt.empty() ||
        static_cast<int64_t>(seq.prompt.size()) >= decoder_->shape().max_len) {
      s = InvalidArgument("a prompt needs 1 to " + std::to_string(decoder_->shape().max_len - 1) +
                          " tokens");
    } else if (std::any_of(seq.prompt.begin(), seq.prompt.end(),
                           [&](int64_t t) { return t < 0 || t >= vocab; })) {
      s = InvalidArgument("token ids must be in [0, " + std::to_string(vocab) + ")");
    } else if (seq.params.max_tokens < 1 || seq.params.top_k < 1 || !(seq.params.temperature > 0) ||
               seq.params.num_stop_ids > shm::kMaxStopIds) {
      s = InvalidArgument("bad generation parameters");
    }
  }
  // The prompt is copied out: the slot is the agent's again.
  shm::CompletionMessage accepted;
  std::memset(&accepted, 0, sizeof(accepted));
  accepted.kind = shm::CompletionKind::kAccepted;
  accepted.batch_id = msg.batch_id;
  accepted.slot = msg.slot;
  if (!Push(accepted)) return;
  if (!s.ok()) return Fail(msg.batch_id, s.message());
  seq.params.top_k =
      std::min<uint32_t>(seq.params.top_k, static_cast<uint32_t>(decoder_->shape().vocab));
  seq.rng.seed(seq.params.seed);
  pending_.push_back(std::move(seq));
}

void GenerationLoop::Cancel(uint64_t id) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->id == id) {
      pending_.erase(it);
      EmitCancelled(id);
      return;
    }
  }
  for (Sequence& s : active_) {
    if (s.id == id) s.cancelled = true;  // leaves at the next step
  }
}

void GenerationLoop::Admit() {
  // The agent may hold this decoder below its slots (SegmentHeader::decode_slots_limit).
  const uint32_t limit = segment_->header()->decode_slots_limit.load(std::memory_order_acquire);
  const size_t slots = limit > 0 ? std::min<size_t>(limit, static_cast<size_t>(decoder_->slots()))
                                 : static_cast<size_t>(decoder_->slots());
  const size_t free = active_.size() < slots ? slots - active_.size() : 0;
  bool open = false;
  switch (options_.refill) {
    case RefillPolicy::kStatic:
      open = active_.empty();
      break;
    case RefillPolicy::kHalf:
      open = active_.empty() || 2 * free >= slots;
      break;
    case RefillPolicy::kStep:
      open = free > 0;
      break;
  }
  while (open && !pending_.empty() && active_.size() < slots) {
    Sequence seq = std::move(pending_.front());
    pending_.pop_front();
    const int slot = static_cast<int>(active_.size());
    auto logits =
        decoder_->Prefill(seq.prompt.data(), static_cast<int64_t>(seq.prompt.size()), slot);
    if (!logits.ok()) {
      Fail(seq.id, logits.status().message());
      continue;
    }
    float prob = -1;
    const int32_t token = Sample(*logits, &seq, &prob);
    seq.position = static_cast<int64_t>(seq.prompt.size());
    seq.last_token = token;
    seq.generated = 1;
    seq.prompt.clear();
    seq.prompt.shrink_to_fit();
    if (!Emit(seq, token, prob)) active_.push_back(std::move(seq));
  }
}

void GenerationLoop::Step() {
  // Cancelled sequences leave before the step.
  for (size_t i = 0; i < active_.size();) {
    if (active_[i].cancelled) {
      EmitCancelled(active_[i].id);
      Remove(i);
    } else {
      ++i;
    }
  }
  if (active_.empty()) return;
  const int count = static_cast<int>(active_.size());
  const auto start = std::chrono::steady_clock::now();
  tokens_.resize(count);
  positions_.resize(count);
  for (int i = 0; i < count; ++i) {
    tokens_[i] = active_[i].last_token;
    positions_[i] = active_[i].position;
  }
  auto logits = decoder_->Step(tokens_.data(), positions_.data(), count);
  if (!logits.ok()) {
    PACKRAT_LOG(ERROR) << "decode step of " << count << " failed: " << logits.status().message();
    while (!active_.empty()) {
      Fail(active_.back().id, logits.status().message());
      active_.pop_back();
    }
    return;
  }
  const int64_t vocab = decoder_->shape().vocab;
  std::vector<bool> done(count, false);
  for (int i = 0; i < count; ++i) {
    Sequence& s = active_[i];
    float prob = -1;
    const int32_t token = Sample(*logits + i * vocab, &s, &prob);
    ++s.position;
    ++s.generated;
    s.last_token = token;
    done[i] = Emit(s, token, prob);
  }
  step_ns_ = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  step_rows_ = count;
  // Compaction from the back, so that the sequence moved into a freed slot was already judged.
  for (int i = count - 1; i >= 0; --i) {
    if (done[i]) Remove(static_cast<size_t>(i));
  }
}

void GenerationLoop::Remove(size_t i) {
  const size_t last = active_.size() - 1;
  if (i != last) {
    decoder_->MoveSlot(static_cast<int>(last), static_cast<int>(i), active_[last].position);
    active_[i] = std::move(active_[last]);
  }
  active_.pop_back();
}

int32_t GenerationLoop::Sample(const float* logits, Sequence* s, float* prob) {
  const int k = static_cast<int>(s->params.top_k);
  const int64_t vocab = decoder_->shape().vocab;
  if (k == 1) {  // greedy: the best id, no softmax
    int32_t id = 0;
    FusedBiasSoftmaxTopK(logits, decoder_->bias(), vocab, 1.0f, 1, &id, nullptr);
    *prob = -1;
    return id;
  }
  top_ids_.resize(k);
  top_probs_.resize(k);
  FusedBiasSoftmaxTopK(logits, decoder_->bias(), vocab, s->params.temperature, k, top_ids_.data(),
                       top_probs_.data());
  double total = 0;
  for (float p : top_probs_) total += std::isfinite(p) ? p : 0;
  if (!(total > 0)) {
    *prob = top_probs_[0];
    return top_ids_[0];
  }
  double u = std::uniform_real_distribution<double>(0, total)(s->rng);
  for (int j = 0; j < k; ++j) {
    const double p = std::isfinite(top_probs_[j]) ? top_probs_[j] : 0;
    if (u < p || j == k - 1) {
      *prob = top_probs_[j];
      return top_ids_[j];
    }
    u -= p;
  }
  return top_ids_[0];
}

void GenerationLoop::EmitCancelled(uint64_t id) {
  if (out_.rows == shm::kMaxStepTokens) Flush();
  shm::StepToken& t = out_.tokens[out_.rows++];
  t.sequence_id = id;
  t.token = -1;
  t.flags = shm::kTokenCancelled;
  t.prob = 0;
}

bool GenerationLoop::Emit(const Sequence& s, int32_t token, float prob) {
  bool finished = false;
  {
    // Finished at max_tokens, or when the token could not be fed back (no cache position left).
    finished = s.generated >= s.params.max_tokens || s.position >= decoder_->shape().max_len;
    for (uint32_t j = 0; j < s.params.num_stop_ids; ++j) {
      finished = finished || token == s.params.stop_ids[j];
    }
  }
  if (out_.rows == shm::kMaxStepTokens) Flush();
  shm::StepToken& t = out_.tokens[out_.rows++];
  t.sequence_id = s.id;
  t.token = token;
  t.flags = finished ? shm::kTokenFinished : 0;
  t.prob = prob;
  return finished;
}

void GenerationLoop::Fail(uint64_t id, const std::string& why) {
  Flush();  // tokens of this sequence sent before go first
  shm::CompletionMessage failed;
  std::memset(&failed, 0, sizeof(failed));
  failed.kind = shm::CompletionKind::kSequenceFailed;
  failed.batch_id = id;
  failed.status = shm::CompletionStatus::kError;
  const size_t n = std::min(why.size(), shm::kErrorTextSize - 1);
  std::memcpy(failed.error, why.data(), n);
  PACKRAT_LOG(WARNING) << "sequence " << id << " failed: " << why;
  Push(failed);
}

void GenerationLoop::Flush() {
  if (out_.rows == 0) return;
  Push(out_);
  out_.rows = 0;
  out_.compute_ns = 0;
  out_.step_rows = 0;
}

bool GenerationLoop::Push(const shm::CompletionMessage& msg) {
  while (alive_) {
    const Status pushed = segment_->completions().Push(msg, options_.poll_interval);
    if (pushed.ok()) return true;
    if (pushed.code() != StatusCode::kDeadlineExceeded || !AgentAlive()) alive_ = false;
  }
  return false;
}

}  // namespace packrat::runtime
