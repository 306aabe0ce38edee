// The YAML config loader on arbitrary text: errors are Status values, never exceptions or
// crashes (yaml-cpp throws; the loader must catch everything).
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = packrat::ParseConfig(text, "fuzz.yaml", "/nonexistent");
  if (!config.ok() && config.status().message().empty()) __builtin_trap();
  return 0;
}
