#include "runtime/output_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace packrat::runtime {
namespace {

// 16 floats: one AVX-512 register, two AVX2 ones, four SSE ones; GCC lowers the operations to
// whatever the clone's target has.
typedef float V16 __attribute__((vector_size(64)));
typedef int32_t V16i __attribute__((vector_size(64)));

constexpr int kLanes = 16;
constexpr int kBlock = 4 * kLanes;  // floats scored, then scanned, at a time (stays in L1)
constexpr float kInf = std::numeric_limits<float>::infinity();

// The helpers are inlined into each clone of Kernel, so their vector code is compiled for that
// clone's instruction set (a call would pass vectors at the default target's ABI).
#define PACKRAT_VECTOR_INLINE inline __attribute__((always_inline))

PACKRAT_VECTOR_INLINE V16 Load(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

PACKRAT_VECTOR_INLINE V16 Splat(float x) { return V16{} + x; }

PACKRAT_VECTOR_INLINE V16 Max(V16 a, V16 b) { return a > b ? a : b; }

PACKRAT_VECTOR_INLINE float HorizontalMax(V16 v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = std::max(m, v[i]);
  return m;
}

PACKRAT_VECTOR_INLINE float HorizontalSum(V16 v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// e^x for x <= 0 (scores minus their maximum), relative error ~2e-7; exactly 0 below -87 (so
// -inf gives 0). Cody–Waite reduction x = n·ln2 + r, |r| <= ln2/2, and Cephes' expf polynomial.
PACKRAT_VECTOR_INLINE V16 Exp(V16 x) {
  const V16 below = x < Splat(-87.0f) ? Splat(1.0f) : Splat(0.0f);
  x = Max(x, Splat(-87.0f));
  // n = round(x / ln2), by the 1.5·2^23 trick (|x / ln2| < 2^22 here).
  const V16 magic = Splat(12582912.0f);
  const V16 n = (x * Splat(1.44269504088896341f) + magic) - magic;
  const V16 r = x - n * Splat(0.693359375f) - n * Splat(-2.12194440e-4f);
  V16 p = Splat(1.9875691500E-4f);
  p = p * r + Splat(1.3981999507E-3f);
  p = p * r + Splat(8.3334519073E-3f);
  p = p * r + Splat(4.1665795894E-2f);
  p = p * r + Splat(1.6666665459E-1f);
  p = p * r + Splat(5.0000001201E-1f);
  p = p * r * r + r + Splat(1.0f);
  const V16i bits = (__builtin_convertvector(n, V16i) + 127) << 23;  // 2^n
  V16 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return below > Splat(0.0f) ? Splat(0.0f) : p * scale;
}

// The k best (score, id) seen so far, in descending score order; among equal scores the one seen
// first stays first.
class Best {
 public:
  Best(int k, float* scores, int32_t* ids) : k_(k), scores_(scores), ids_(ids) {}

  // Scores above this may enter.
  float threshold() const { return size_ < k_ ? -kInf : scores_[k_ - 1]; }
  bool full() const { return size_ == k_; }

  void Offer(float score, int32_t id) {
    if (size_ == k_ && !(score > scores_[k_ - 1])) return;
    if (size_ < k_ && !(score >= -kInf)) return;  // NaN never enters
    int at = size_ < k_ ? size_ : k_ - 1;
    // Shift the strictly smaller ones down: equal scores keep their (earlier) place.
    while (at > 0 && scores_[at - 1] < score) {
      if (at < k_) scores_[at] = scores_[at - 1], ids_[at] = ids_[at - 1];
      --at;
    }
    scores_[at] = score;
    ids_[at] = id;
    if (size_ < k_) ++size_;
  }

  int size() const { return size_; }

 private:
  const int k_;
  float* scores_;
  int32_t* ids_;
  int size_ = 0;
};

__attribute__((target_clones("avx512f", "avx2", "default"))) void Kernel(
    const float* logits, const float* bias, int64_t n, float temperature, int k, int32_t* ids,
    float* probs, float* best_scores) {
  const float inv_t = 1.0f / temperature;
  const bool softmax = probs != nullptr;
  Best best(k, best_scores, ids);
  float max = -kInf;  // running maximum of the scores
  float sum = 0;      // Σ exp(z - max) over the scores seen
  alignas(64) float z[kBlock];
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    V16 block_max = Splat(-kInf);
    for (int v = 0; v < kBlock; v += kLanes) {
      V16 x = Load(logits + i + v);
      if (bias != nullptr) x += Load(bias + i + v);
      x *= Splat(inv_t);
      std::memcpy(z + v, &x, sizeof(x));
      block_max = Max(block_max, x);
    }
    const float m = HorizontalMax(block_max);
    if (!best.full() || m > best.threshold()) {
      for (int j = 0; j < kBlock; ++j) {
        if (!best.full() || z[j] > best.threshold()) best.Offer(z[j], static_cast<int32_t>(i + j));
      }
    }
    if (!softmax || m == -kInf) continue;
    if (m > max) {  // rescale what was summed to the new maximum
      sum *= std::exp(max - m);
      max = m;
    }
    V16 acc = Splat(0.0f);
    for (int v = 0; v < kBlock; v += kLanes) acc += Exp(Load(z + v) - Splat(max));
    sum += HorizontalSum(acc);
  }
  for (; i < n; ++i) {  // the tail, one at a time
    const float x = (logits[i] + (bias != nullptr ? bias[i] : 0.0f)) * inv_t;
    if (!best.full() || x > best.threshold()) best.Offer(x, static_cast<int32_t>(i));
    if (!softmax || x == -kInf) continue;
    if (x > max) {
      sum *= std::exp(max - x);
      max = x;
    }
    sum += std::exp(x - max);
  }
  // Fewer than k offered (NaN scores): fill with the next unused ids, probability NaN.
  for (int j = best.size(); j < k; ++j) {
    best_scores[j] = std::numeric_limits<float>::quiet_NaN();
    ids[j] = j < n ? static_cast<int32_t>(j) : 0;
  }
  if (softmax) {
    for (int j = 0; j < k; ++j) probs[j] = std::exp(best_scores[j] - max) / sum;
  }
}

}  // namespace

void FusedBiasSoftmaxTopK(const float* logits, const float* bias, int64_t n, float temperature,
                          int k, int32_t* ids, float* probs) {
  float stack_scores[64];
  std::unique_ptr<float[]> heap_scores;
  float* scores = stack_scores;
  if (k > 64) {
    heap_scores.reset(new float[k]);
    scores = heap_scores.get();
  }
  Kernel(logits, bias, n, temperature, k, ids, probs, scores);
}

void FusedBiasSoftmaxTopKRows(const float* logits, const float* bias, int64_t rows, int64_t n,
                              float temperature, int k, int32_t* ids, float* probs) {
  for (int64_t r = 0; r < rows; ++r) {
    FusedBiasSoftmaxTopK(logits + r * n, bias, n, temperature, k, ids + r * k,
                         probs == nullptr ? nullptr : probs + r * k);
  }
}

}  // namespace packrat::runtime
