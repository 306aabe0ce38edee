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

// How a decoder's Step() pads its count with filler rows in the free slots past it (a step's
// time is far from monotone in its rows: the GEMM kernels favour some sizes).
enum class StepPadding {
  kTuned,    // times a step at every count at load; pads a count to the larger one whose step
             // is fastest, where that is at least 10% faster
  kNone,     // runs each count as it is
  kToSlots,  // runs every step at all slots (tests: the fillers leave the real rows alone)
};

// The TorchScript decoder of `model_path` (scripts/make_models.py's GptDecoder shape: methods
// config(), prefill(), step(); attribute lm_bias), with caches for `slots` sequences, running
// on `threads` intra-op threads. Warms up (a prefill and a step at every count, then the
// timing of `padding`) before it returns. Errors: kNotFound, kInvalidArgument (not such a
// model), kInternal.
StatusOr<std::unique_ptr<Decoder>> LoadTorchDecoder(const std::string& model_path, int threads,
                                                    int slots,
                                                    StepPadding padding = StepPadding::kTuned);

}  // namespace packrat::runtime
