#include "agent/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace packrat::metrics {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

// Appends `text` with `\` and newline escaped, `"` too when `quote`, and invalid UTF-8 bytes
// replaced by U+FFFD.
void AppendEscaped(std::string_view text, bool quote, std::string* out) {
  out->reserve(out->size() + text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote) {
      out->append("\\\"");
    } else {
      const size_t len = Utf8SequenceLength(text, i);
      if (len == 0) {
        out->append("\xEF\xBF\xBD");
        ++i;
        continue;
      }
      out->append(text.substr(i, len));
      i += len;
      continue;
    }
    ++i;
  }
}

void AppendSampleHead(std::string_view name, std::string_view suffix, std::string_view labels,
                      std::string_view extra, std::string* out) {
  out->append(name);
  out->append(suffix);
  if (!labels.empty() || !extra.empty()) {
    out->push_back('{');
    out->append(labels);
    if (!labels.empty() && !extra.empty()) out->push_back(',');
    out->append(extra);
    out->push_back('}');
  }
  out->push_back(' ');
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAlpha(c) || c == '_' || c == ':' || (i > 0 && IsDigit(c)))) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAlpha(c) || c == '_' || (i > 0 && IsDigit(c)))) return false;
  }
  return true;
}

void AppendEscapedHelp(std::string_view help, std::string* out) {
  AppendEscaped(help, /*quote=*/false, out);
}

void AppendEscapedLabelValue(std::string_view value, std::string* out) {
  AppendEscaped(value, /*quote=*/true, out);
}

void AppendDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  // Shortest round-trip digits; plain decimal for exponents -4..20 (as JavaScript prints
  // numbers), so bucket bounds read le="0.0005" and le="1000000", not le="5e-04".
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  const std::string_view shortest(buf, static_cast<size_t>(result.ptr - buf));
  const size_t e = shortest.find('e');
  if (e != std::string_view::npos) {
    int exponent = 0;
    std::from_chars(shortest.data() + e + (shortest[e + 1] == '+' ? 2 : 1),
                    shortest.data() + shortest.size(), exponent);
    if (exponent >= -4 && exponent <= 20) {
      result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
    }
  }
  out->append(buf, result.ptr);
}

std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (i > 0) text.push_back(',');
    text.append(names[i]);
    text.append("=\"");
    AppendEscapedLabelValue(values[i], &text);
    text.push_back('"');
  }
  return text;
}

void AppendSample(std::string_view name, std::string_view suffix, std::string_view labels,
                  std::string_view extra, double value, std::string* out) {
  AppendSampleHead(name, suffix, labels, extra, out);
  AppendDouble(value, out);
  out->push_back('\n');
}

void AppendSample(std::string_view name, std::string_view suffix, std::string_view labels,
                  std::string_view extra, uint64_t value, std::string* out) {
  AppendSampleHead(name, suffix, labels, extra, out);
  char buf[24];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
  out->push_back('\n');
}

}  // namespace packrat::metrics
