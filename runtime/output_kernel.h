// The fused output layer of a generative model (amun-topup-batching-paper §2.2): for one row of
// logits, one pass over memory adds the output bias, keeps the running maximum and the sum of
// exponentials rescaled to it (online softmax), and keeps the k best scores; the k best ids
// come out with their softmax probabilities. Greedy decoding (k = 1, no probability wanted)
// skips the exponentials altogether.
//
// Scores are z_i = (logit_i + bias_i) / temperature; probabilities are softmax(z). The best
// come in descending score order; among equal scores the lower index comes first. Logits of
// -inf get probability 0; if every score is -inf (or any is +inf or NaN) the probabilities are
// NaN, as ATen's softmax gives.
//
// Vectorised with GCC vector extensions, compiled for AVX-512, AVX2 and plain x86-64 and picked
// at load time (function multi-versioning). Torch-free; thread-safe (no state).
#pragma once

#include <cstdint>

namespace packrat::runtime {

// `logits` and `bias` (may be null) hold `n` floats; `ids` receives k ids and, unless null,
// `probs` their probabilities. 1 <= k <= n; temperature > 0.
void FusedBiasSoftmaxTopK(const float* logits, const float* bias, int64_t n, float temperature,
                          int k, int32_t* ids, float* probs);

// The same for `rows` rows of `n` logits each (row-major), k results per row.
void FusedBiasSoftmaxTopKRows(const float* logits, const float* bias, int64_t rows, int64_t n,
                              float temperature, int k, int32_t* ids, float* probs);

}  // namespace packrat::runtime
