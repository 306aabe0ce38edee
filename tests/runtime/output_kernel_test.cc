// The fused bias + softmax + top-k kernel against ATen's softmax and topk on random logits,
// including ties, -inf and huge values, at vocabularies around the vector width.
#include "runtime/output_kernel.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace packrat::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::vector<float> logits;
  std::vector<float> bias;
  float temperature = 1;
  int k = 1;
};

// Checks the kernel against ATen on one row: the ids' scores are the k largest (ties may pick
// any of equal scores, but the kernel takes the lower index first), in descending order, and the
// probabilities equal softmax's.
void Check(const Case& c) {
  const int64_t n = static_cast<int64_t>(c.logits.size());
  std::vector<int32_t> ids(c.k);
  std::vector<float> probs(c.k);
  FusedBiasSoftmaxTopK(c.logits.data(), c.bias.empty() ? nullptr : c.bias.data(), n, c.temperature,
                       c.k, ids.data(), probs.data());
  at::Tensor x = at::from_blob(const_cast<float*>(c.logits.data()), {n}).clone();
  if (!c.bias.empty()) x += at::from_blob(const_cast<float*>(c.bias.data()), {n});
  x /= c.temperature;
  const at::Tensor p = at::softmax(x, 0);
  const auto [top_values, top_ids] = at::topk(x, c.k);
  for (int j = 0; j < c.k; ++j) {
    const float want_score = top_values[j].item<float>();
    const float got_score = x[ids[j]].item<float>();
    ASSERT_EQ(got_score, want_score) << "rank " << j << " id " << ids[j];
    if (j > 0 && x[ids[j - 1]].item<float>() == got_score) {
      EXPECT_LT(ids[j - 1], ids[j]) << "equal scores: lower index first";
    }
    const float want_p = p[ids[j]].item<float>();
    if (std::isnan(want_p)) {
      EXPECT_TRUE(std::isnan(probs[j]));
    } else {
      EXPECT_NEAR(probs[j], want_p, 2e-6 + 2e-5 * want_p) << "rank " << j;
    }
  }
  // Greedy without probabilities: the same best id.
  int32_t greedy = -1;
  FusedBiasSoftmaxTopK(c.logits.data(), c.bias.empty() ? nullptr : c.bias.data(), n, c.temperature,
                       1, &greedy, nullptr);
  EXPECT_EQ(greedy, ids[0]);
}

std::vector<float> Normal(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

TEST(OutputKernelTest, RandomLogitsAtManySizes) {
  for (int64_t n : {1, 7, 16, 63, 64, 65, 130, 1000, 32000, 50257}) {
    for (int k : {1, 5, 40}) {
      if (k > n) continue;
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      Case c;
      c.logits = Normal(n, 3, static_cast<uint32_t>(n + k));
      c.bias = Normal(n, 1, static_cast<uint32_t>(n * 7 + k));
      c.k = k;
      Check(c);
    }
  }
}

TEST(OutputKernelTest, Temperature) {
  for (float t : {0.1f, 0.7f, 1.0f, 2.5f}) {
    Case c;
    c.logits = Normal(5000, 4, 3);
    c.temperature = t;
    c.k = 10;
    Check(c);
  }
}

TEST(OutputKernelTest, TiesTakeTheLowerIndexFirst) {
  Case c;
  c.logits.assign(300, 0.5f);  // all equal
  c.k = 7;
  Check(c);
  std::vector<int32_t> ids(7);
  FusedBiasSoftmaxTopK(c.logits.data(), nullptr, 300, 1, 7, ids.data(), nullptr);
  for (int j = 0; j < 7; ++j) EXPECT_EQ(ids[j], j);
  // Ties at the top across blocks and the tail.
  c.logits = Normal(1000, 1, 9);
  for (int64_t i : {3, 64, 500, 999}) c.logits[i] = 10;
  c.k = 5;
  Check(c);
}

TEST(OutputKernelTest, MinusInfinityHasProbabilityZero) {
  Case c;
  c.logits = Normal(2000, 2, 4);
  for (size_t i = 0; i < c.logits.size(); i += 3) c.logits[i] = -kInf;  // a masked vocabulary
  c.k = 8;
  Check(c);
  // Only a handful finite: more wanted than finite ones, the rest are -inf with probability 0.
  c.logits.assign(200, -kInf);
  c.logits[17] = 1;
  c.logits[150] = 2;
  c.k = 4;
  Check(c);
}

TEST(OutputKernelTest, EverythingMinusInfinityGivesNaNLikeATen) {
  Case c;
  c.logits.assign(100, -kInf);
  c.k = 2;
  Check(c);
}

TEST(OutputKernelTest, HugeValuesDoNotOverflow) {
  Case c;
  c.logits = Normal(4096, 1, 5);
  c.logits[100] = 3e37f;
  c.logits[4000] = 2.9e37f;
  c.logits[7] = -3e37f;
  c.k = 3;
  Check(c);
  c.logits = Normal(777, 1e4f, 6);  // scores far apart: almost all mass on the best
  c.k = 6;
  Check(c);
}

TEST(OutputKernelTest, RowsAreIndependent) {
  const int64_t rows = 5, n = 1234;
  std::vector<float> logits = Normal(rows * n, 2, 7), bias = Normal(n, 1, 8);
  std::vector<int32_t> ids(rows * 3);
  std::vector<float> probs(rows * 3);
  FusedBiasSoftmaxTopKRows(logits.data(), bias.data(), rows, n, 1, 3, ids.data(), probs.data());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> one(3);
    std::vector<float> p(3);
    FusedBiasSoftmaxTopK(logits.data() + r * n, bias.data(), n, 1, 3, one.data(), p.data());
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(ids[r * 3 + j], one[j]);
      EXPECT_EQ(probs[r * 3 + j], p[j]);
    }
  }
}

}  // namespace
}  // namespace packrat::runtime
