#include "agent/config/kernel_settings.h"

#include <fstream>
#include <sstream>

namespace packrat {

std::string KernelSettings::Key() const {
  std::string key = precision == Precision::kBf16 ? "bf16" : "fp32";
  if (memory_format == MemoryFormat::kChannelsLast) key += "+cl";
  if (freeze) key += "+frozen";
  return key;
}

CpuFeatures ReadCpuFeatures(const std::string& cpuinfo_path) {
  CpuFeatures features;
  std::ifstream in(cpuinfo_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::stringstream flags(line.substr(line.find(':') + 1));
    std::string flag;
    while (flags >> flag) {
      if (flag == "avx512_bf16") features.avx512_bf16 = true;
      if (flag == "amx_bf16") features.amx_bf16 = true;
    }
    break;  // the first processor speaks for all
  }
  return features;
}

StatusOr<KernelSettings> ResolveKernelSettings(const OptimizeConfig& config, const CpuFeatures& cpu,
                                               const std::vector<TensorSpec>& inputs) {
  if (config.precision == "bf16" && !cpu.bf16() && !config.allow_emulated_bf16) {
    return InvalidArgument(
        "optimize.precision: bf16 on a CPU without AVX-512-BF16 or AMX-BF16 is emulated, about "
        "30x slower than fp32; use 'auto' (bf16 only where the CPU has it), or set "
        "optimize.allow_emulated_bf16: true");
  }
  KernelSettings s;
  if (config.precision == "bf16" || (config.precision == "auto" && cpu.bf16())) {
    s.precision = Precision::kBf16;
  }
  bool image_like = false;
  for (const TensorSpec& in : inputs) {
    image_like = image_like || (in.shape.size() == 4 &&
                                (in.datatype == DataType::kFp32 || in.datatype == DataType::kBf16));
  }
  if (config.memory_format == "channels_last" || (config.memory_format == "auto" && image_like)) {
    s.memory_format = MemoryFormat::kChannelsLast;
  }
  s.freeze = config.freeze;
  return s;
}

}  // namespace packrat
