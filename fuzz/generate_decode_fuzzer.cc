// The generate extension's request decoder (agent/kserve/generate_codec.h) on arbitrary bytes.
// Whatever it accepts must respect the limits it was given.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/kserve/generate_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  packrat::GenerateLimits limits;
  limits.vocab = 1000;
  limits.max_prompt_tokens = 64;
  limits.max_tokens = 256;
  limits.default_max_tokens = 16;
  auto call = packrat::DecodeGenerateRequest(
      std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!call.ok()) return 0;
  if (call->input_ids.empty() || call->input_ids.size() > 64) __builtin_trap();
  for (int64_t id : call->input_ids) {
    if (id < 0 || id >= 1000) __builtin_trap();
  }
  for (int64_t id : call->stop_ids) {
    if (id < 0 || id >= 1000) __builtin_trap();
  }
  if (call->stop_ids.size() > 8 || call->max_tokens < 1 || call->max_tokens > 256 ||
      call->top_k < 1 || call->top_k > 1000 || !(call->temperature > 0)) {
    __builtin_trap();
  }
  return 0;
}
