#include "agent/config/kernel_settings.h"

#include <gtest/gtest.h>

#include <fstream>

#include "agent/config/config.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

// A /proc/cpuinfo with `flags` for two processors (only the first is read).
std::string FakeCpuinfo(const testing::TempDir& dir, const std::string& flags) {
  const std::string path = dir.path() + "/cpuinfo";
  std::ofstream(path) << "processor\t: 0\nmodel name\t: Fake CPU\nflags\t\t: fpu sse2 " << flags
                      << "\n\nprocessor\t: 1\nflags\t\t: fpu\n";
  return path;
}

const std::vector<TensorSpec> kImage = {{"x", DataType::kFp32, {-1, 3, 224, 224}}};
const std::vector<TensorSpec> kTokens = {{"ids", DataType::kInt64, {-1, 128}}};

TEST(KernelSettingsTest, ReadsBf16FlagsFromCpuinfo) {
  testing::TempDir dir;
  EXPECT_FALSE(ReadCpuFeatures(FakeCpuinfo(dir, "avx2 avx512f")).bf16());
  EXPECT_TRUE(ReadCpuFeatures(FakeCpuinfo(dir, "avx512f avx512_bf16")).avx512_bf16);
  EXPECT_TRUE(ReadCpuFeatures(FakeCpuinfo(dir, "amx_tile amx_bf16")).amx_bf16);
  EXPECT_FALSE(ReadCpuFeatures(dir.path() + "/missing").bf16());
}

TEST(KernelSettingsTest, AutoStaysFp32WithoutBf16Support) {
  testing::TempDir dir;
  const CpuFeatures cpu = ReadCpuFeatures(FakeCpuinfo(dir, "avx2 avx512f avx512_vnni"));
  const KernelSettings s = *ResolveKernelSettings({"auto", "auto", true}, cpu, kImage);
  EXPECT_EQ(s.precision, Precision::kFp32);
  EXPECT_EQ(s.memory_format, MemoryFormat::kChannelsLast);
  EXPECT_EQ(s.Key(), "fp32+cl+frozen");
}

TEST(KernelSettingsTest, AutoPicksBf16WhereTheCpuHasIt) {
  testing::TempDir dir;
  const CpuFeatures cpu = ReadCpuFeatures(FakeCpuinfo(dir, "avx512f amx_bf16"));
  EXPECT_EQ(ResolveKernelSettings({"auto", "auto", true}, cpu, kImage)->Key(), "bf16+cl+frozen");
  // Channels-last only for image-like (4-D floating) inputs.
  EXPECT_EQ(ResolveKernelSettings({"auto", "auto", false}, cpu, kTokens)->Key(), "bf16");
}

TEST(KernelSettingsTest, ExplicitSettingsAreKept) {
  const CpuFeatures none;
  EXPECT_EQ(ResolveKernelSettings({"bf16", "contiguous", false, true}, none, kImage)->Key(),
            "bf16");
  EXPECT_EQ(ResolveKernelSettings({"fp32", "channels_last", false}, none, kTokens)->Key(),
            "fp32+cl");
  EXPECT_TRUE(ResolveKernelSettings({}, none, kImage)->is_default());
}

// bf16 by name where the CPU emulates it (30x slower): refused, pointing to auto, unless the
// config opts in.
TEST(KernelSettingsTest, Bf16ByNameOnACpuWithoutItIsRefusedUnlessAllowed) {
  testing::TempDir dir;
  const CpuFeatures avx2 = ReadCpuFeatures(FakeCpuinfo(dir, "avx2 fma"));
  const StatusOr<KernelSettings> refused =
      ResolveKernelSettings({"bf16", "contiguous", false}, avx2, kImage);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("'auto'"), std::string::npos);
  EXPECT_EQ(ResolveKernelSettings({"bf16", "contiguous", false, true}, avx2, kImage)->Key(),
            "bf16");
  const CpuFeatures amx = ReadCpuFeatures(FakeCpuinfo(dir, "avx512f amx_bf16"));
  EXPECT_EQ(ResolveKernelSettings({"bf16", "contiguous", false}, amx, kImage)->Key(), "bf16");
}

std::string Model(const std::string& extra) {
  return "models:\n"
         "  - name: m\n"
         "    path: m.pt\n"
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 8, 8]}]\n"
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 2]}]\n"
         "    instances: [{count: 1, threads: 1, batch: 1}]\n" +
         extra;
}

TEST(KernelSettingsTest, ConfigOptimizeAndAccuracy) {
  auto c = ParseConfig(Model("    optimize: {precision: bf16, memory_format: channels_last, "
                             "freeze: true}\n"
                             "    accuracy: {samples: 4, max_rel_error: 0.02, "
                             "min_top1_agreement: 0.95, strict: true}\n"),
                       "t.yaml", "/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ModelConfig& m = c->models[0];
  EXPECT_EQ(m.optimize.precision, "bf16");
  EXPECT_EQ(m.optimize.memory_format, "channels_last");
  EXPECT_TRUE(m.optimize.freeze);
  EXPECT_EQ(m.accuracy.samples, 4);
  EXPECT_DOUBLE_EQ(m.accuracy.max_rel_error, 0.02);
  EXPECT_DOUBLE_EQ(m.accuracy.min_top1_agreement, 0.95);
  EXPECT_TRUE(m.accuracy.strict);
  EXPECT_TRUE(m.kernel.is_default()) << "resolved by the agent, not the parser";

  auto a = ParseConfig(Model("    optimize: auto\n"), "t.yaml", "/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->models[0].optimize.precision, "auto");
  EXPECT_EQ(a->models[0].optimize.memory_format, "auto");
  EXPECT_TRUE(a->models[0].optimize.freeze);
}

TEST(KernelSettingsTest, ConfigErrorsNameTheKey) {
  auto bad = ParseConfig(Model("    optimize: {precision: fp8}\n"), "t.yaml", "/");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t.yaml:7: models[0].optimize.precision: must be fp32, "
                                        "bf16 or auto"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseConfig(Model("    optimize: fast\n"), "t.yaml", "/").ok());
  EXPECT_FALSE(ParseConfig(Model("    optimize: {layout: nhwc}\n"), "t.yaml", "/").ok());
  EXPECT_FALSE(ParseConfig(Model("    accuracy: {max_rel_error: -1}\n"), "t.yaml", "/").ok());
}

}  // namespace
}  // namespace packrat
