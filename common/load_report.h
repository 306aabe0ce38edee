// The load report a runtime writes into its segment once it has loaded and warmed up its model:
// space-separated `key=value` items, "kernel=bf16+cl checked=1 max_rel_error=0.004" or, from a
// decoder, "kernel=fp32 layers=2 heads=4 max_len=128 vocab=256 slots=8" (runtime/runtime_main.cc).
// One parser for everything that reads it: the instances, the metrics, the model metadata.
//
// A value-type; items keep the report's order. Malformed items (no '=') are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace packrat {

class LoadReport {
 public:
  LoadReport() = default;
  static LoadReport Parse(std::string_view text);

  // The value of `key`, or nullopt.
  std::optional<std::string_view> Get(std::string_view key) const;
  // The value of `key` as an integer / a number; `fallback` where absent or not a number.
  int64_t Int(std::string_view key, int64_t fallback = 0) const;
  double Number(std::string_view key, double fallback = 0) const;

  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

}  // namespace packrat
