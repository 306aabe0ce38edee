#include "common/load_report.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace packrat {

LoadReport LoadReport::Parse(std::string_view text) {
  LoadReport report;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos && eq > 0) {
      report.items_.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
    pos = end + 1;
  }
  return report;
}

std::optional<std::string_view> LoadReport::Get(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

int64_t LoadReport::Int(std::string_view key, int64_t fallback) const {
  const std::optional<std::string_view> v = Get(key);
  if (!v) return fallback;
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  return ec == std::errc() && end == v->data() + v->size() ? out : fallback;
}

double LoadReport::Number(std::string_view key, double fallback) const {
  const std::optional<std::string_view> v = Get(key);
  if (!v || v->empty()) return fallback;
  const std::string text(*v);
  char* end = nullptr;
  const double out = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(out) ? out : fallback;
}

}  // namespace packrat
