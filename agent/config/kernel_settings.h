// How a runtime runs a model's kernels (issue: channels-last, bf16, graph freezing), and the
// accuracy guard that checks the result against the FP32 original at load.
//
// The config may say `auto`; the agent resolves it once at start from the CPU's flags (bf16
// only where AVX-512-BF16 or AMX-BF16 exists) and the model's inputs (channels-last only for
// image-like 4-D inputs), and from then on only resolved settings exist: they go to the
// runtimes, key the profiles, and label plans and metrics, so that a bf16 plan is never made
// from FP32 measurements.
#pragma once

#include <string>
#include <vector>

#include "agent/kserve/tensor.h"
#include "common/status.h"

namespace packrat {

enum class Precision { kFp32, kBf16 };
enum class MemoryFormat { kContiguous, kChannelsLast };

struct OptimizeConfig {                      // as written in the config
  std::string precision = "fp32";            // fp32 | bf16 | auto
  std::string memory_format = "contiguous";  // contiguous | channels_last | auto
  bool freeze = false;                       // torch.jit.freeze + optimize_for_inference
  // bf16 asked by name on a CPU without it: libtorch emulates it, about 30× slower than fp32
  // (ResNet-18 on an AVX2-only EPYC: 0.03×). Refused unless this is set.
  bool allow_emulated_bf16 = false;
};

struct AccuracyConfig {
  int samples = 8;                  // random inputs compared at load; 0 = no check
  double max_rel_error = 0.05;      // max |opt − fp32| / max |fp32|, per output
  double min_top1_agreement = 0.9;  // share of equal argmax rows (2-D float outputs)
  bool strict = false;              // beyond tolerance: refuse to start (else: fall back to FP32)
};

struct KernelSettings {
  Precision precision = Precision::kFp32;
  MemoryFormat memory_format = MemoryFormat::kContiguous;
  bool freeze = false;

  bool is_default() const {
    return precision == Precision::kFp32 && memory_format == MemoryFormat::kContiguous && !freeze;
  }
  // Stable short form for profile keys, logs, metadata and metrics: "fp32", "bf16+cl+frozen".
  std::string Key() const;
  bool operator==(const KernelSettings&) const = default;
};

struct CpuFeatures {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool bf16() const { return avx512_bf16 || amx_bf16; }
};

// The flags of the first processor in a /proc/cpuinfo-format file (tests pass fakes). No
// file or no flags line: no features.
CpuFeatures ReadCpuFeatures(const std::string& cpuinfo_path = "/proc/cpuinfo");

// Resolves `auto`s. InvalidArgument, naming optimize.precision and pointing to `auto`, for bf16
// asked by name on a CPU without bf16 unless config.allow_emulated_bf16.
StatusOr<KernelSettings> ResolveKernelSettings(const OptimizeConfig& config, const CpuFeatures& cpu,
                                               const std::vector<TensorSpec>& inputs);

}  // namespace packrat
