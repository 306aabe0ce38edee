#include "agent/pool/cpu_list.h"

#include <algorithm>
#include <charconv>

namespace packrat {
namespace {

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

}  // namespace

StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return std::vector<int>();
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  constexpr int kMaxCpu = 1 << 16;
  std::vector<int> cpus;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    const bool ok = dash == std::string_view::npos ? ParseInt(item, &lo) && (hi = lo, true)
                                                   : ParseInt(item.substr(0, dash), &lo) &&
                                                         ParseInt(item.substr(dash + 1), &hi);
    if (!ok || lo > hi || hi >= kMaxCpu) {
      return InvalidArgument("bad CPU list '" + std::string(text) + "'");
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace packrat
