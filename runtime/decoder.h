// A generative model as the decode loop sees it (torch-free, so the loop is tested with a fake):
// a key/value cache with a fixed number of slots, prefill of one prompt into a slot, and one
// decode step for the sequences in slots 0..n-1.
//
// Thread-safety: one thread at a time. Returned logits stay valid until the next call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace packrat::runtime {

struct DecoderShape {
  int layers = 0;
  int heads = 0;
  int head_dim = 0;
  int64_t max_len = 0;  // positions a sequence may use, prompt included
  int64_t vocab = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;

  virtual const DecoderShape& shape() const = 0;
  // Cache slots: the most sequences decoded together.
  virtual int slots() const = 0;
  // The output bias (vocab floats) the logits come without, or null.
  virtual const float* bias() const = 0;

  // Runs the `n` prompt tokens into cache slot `slot` (positions 0..n-1); the logits of the
  // last position (vocab floats, no bias).
  virtual StatusOr<const float*> Prefill(const int64_t* ids, int64_t n, int slot) = 0;
  // One token for each sequence in slots 0..count-1, token i at position positions[i] (its
  // key/value are cached there); logits [count, vocab] (no bias).
  virtual StatusOr<const float*> Step(const int64_t* tokens, const int64_t* positions,
                                      int count) = 0;
  // Copies the first `length` cached positions of slot `from` into slot `to` (compaction when a
  // sequence leaves: the active ones stay in slots 0..n-1).
  virtual void MoveSlot(int from, int to, int64_t length) = 0;
};

// The TorchScript decoder of `model_path` (scripts/make_models.py's GptDecoder shape: methods
// config(), prefill(), step(); attribute lm_bias), with caches for `slots` sequences, running
// on `threads` intra-op threads. Warms up (a prefill and a step at every count) before it
// returns. Errors: kNotFound, kInvalidArgument (not such a model), kInternal.
StatusOr<std::unique_ptr<Decoder>> LoadTorchDecoder(const std::string& model_path, int threads,
                                                    int slots);

}  // namespace packrat::runtime
