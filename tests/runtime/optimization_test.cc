// Kernel optimisations in the runtime (bf16, channels-last, freezing) against the FP32 original
// on the same inputs, and the accuracy guard's fallback and strict modes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/model_runner.h"

namespace packrat::runtime {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;

struct Case {
  std::string file;
  InputSpec input;
  int64_t rows;
};

Case SmallCnn() { return {"small_cnn.pt", {DataType::kFp32, {3, 32, 32}}, 4}; }
Case TinyBert() { return {"tiny_bert.pt", {DataType::kInt64, {16}}, 3}; }

std::unique_ptr<ModelRunner> Make(const Case& c, Optimization opt, AccuracyGuard guard = {}) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/" + c.file;
  o.threads = 1;
  o.output_types = {DataType::kFp32};
  o.optimization = opt;
  o.guard = guard;
  o.inputs = {c.input};
  auto r = ModelRunner::Create(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// One forward pass on fixed random inputs; the FP32 outputs of output 0.
std::vector<float> Forward(ModelRunner& runner, const Case& c) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> id(0, 99);
  int64_t per_row = 1;
  for (int64_t d : c.input.row_shape) per_row *= d;
  std::vector<float> floats(c.rows * per_row);
  std::vector<int64_t> ints(c.rows * per_row);
  for (float& f : floats) f = normal(rng);
  for (int64_t& v : ints) v = id(rng);
  RawTensor in;
  in.datatype = c.input.datatype;
  in.shape = {c.rows};
  in.shape.insert(in.shape.end(), c.input.row_shape.begin(), c.input.row_shape.end());
  if (c.input.datatype == DataType::kFp32) {
    in.data = floats.data();
    in.byte_size = floats.size() * 4;
  } else {
    in.data = ints.data();
    in.byte_size = ints.size() * 8;
  }
  std::vector<uint8_t> out(1 << 20);
  std::vector<RawTensor> outputs;
  const Status s = runner.Run({in}, out.data(), out.size(), &outputs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  EXPECT_EQ(outputs[0].datatype, DataType::kFp32) << "the API stays FP32";
  const float* p = static_cast<const float*>(outputs[0].data);
  return std::vector<float>(p, p + outputs[0].byte_size / 4);
}

// max |a − b| / max |a|
double RelError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  return err / scale;
}

TEST(OptimizationTest, ChannelsLastAndFreezingKeepFp32Results) {
  const Case c = SmallCnn();
  auto fp32 = Make(c, {});
  auto opt = Make(c, {.bf16 = false, .channels_last = true, .freeze = true});
  ASSERT_TRUE(fp32 && opt);
  EXPECT_EQ(opt->report().kernel, "fp32+cl+frozen");
  EXPECT_LT(RelError(Forward(*fp32, c), Forward(*opt, c)), 1e-5);
}

TEST(OptimizationTest, Bf16SmallCnnIsWithinTolerance) {
  const Case c = SmallCnn();
  auto fp32 = Make(c, {});
  auto opt = Make(c, {.bf16 = true, .channels_last = true, .freeze = true}, {.samples = 8});
  ASSERT_TRUE(fp32 && opt);
  const LoadReport& r = opt->report();
  EXPECT_EQ(r.kernel, "bf16+cl+frozen");
  EXPECT_TRUE(r.checked);
  EXPECT_FALSE(r.fallback);
  EXPECT_GT(r.max_rel_error, 0) << "bf16 rounds";
  EXPECT_LT(r.max_rel_error, 0.05);
  EXPECT_GE(r.top1_agreement, 0.9);
  EXPECT_LT(RelError(Forward(*fp32, c), Forward(*opt, c)), 0.05);
}

TEST(OptimizationTest, Bf16SmallTransformerIsWithinTolerance) {
  const Case c = TinyBert();
  auto fp32 = Make(c, {});
  auto opt = Make(c, {.bf16 = true, .channels_last = false, .freeze = true}, {.samples = 4});
  ASSERT_TRUE(fp32 && opt);
  EXPECT_EQ(opt->report().kernel, "bf16+frozen");
  EXPECT_TRUE(opt->report().checked);
  // A 2-D output: its argmax agreement is computed (hidden states here, not classes).
  EXPECT_GE(opt->report().top1_agreement, 0.9);
  EXPECT_LT(RelError(Forward(*fp32, c), Forward(*opt, c)), 0.05);
}

TEST(OptimizationTest, BeyondToleranceFallsBackToFp32) {
  const Case c = SmallCnn();
  auto fp32 = Make(c, {});
  // bf16 can never be exact: a zero tolerance trips the guard.
  auto guarded = Make(c, {.bf16 = true, .channels_last = true, .freeze = false},
                      {.samples = 4, .max_rel_error = 0.0});
  ASSERT_TRUE(fp32 && guarded);
  EXPECT_TRUE(guarded->report().fallback);
  EXPECT_EQ(guarded->report().kernel, "fp32");
  EXPECT_EQ(Forward(*fp32, c), Forward(*guarded, c)) << "the FP32 original serves";
}

TEST(OptimizationTest, BeyondToleranceWithStrictRefusesToLoad) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/small_cnn.pt";
  o.optimization = {.bf16 = true, .channels_last = false, .freeze = false};
  o.guard = {.samples = 4, .max_rel_error = 0.0, .min_top1_agreement = 0.9, .strict = true};
  o.inputs = {SmallCnn().input};
  const auto r = ModelRunner::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("accuracy.strict"), std::string::npos);
}

TEST(OptimizationTest, ReportLineIsParseable) {
  LoadReport r;
  r.kernel = "bf16+cl";
  r.checked = true;
  r.max_rel_error = 0.0125;
  r.top1_agreement = 1;
  EXPECT_EQ(r.ToString(),
            "kernel=bf16+cl checked=1 max_abs_error=0 max_rel_error=0.0125 top1_agreement=1 "
            "fallback=0");
}

}  // namespace
}  // namespace packrat::runtime
