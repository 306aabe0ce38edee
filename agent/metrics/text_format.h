// The Prometheus text exposition format, version 0.0.4: name rules, escaping and number
// formatting shared by every metric family.
//
//   # HELP <name> <help, with \ and newline escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \ " and newline escaped>",...} <value>
//
// All functions are pure and thread-safe. Text that is not valid UTF-8 (Prometheus rejects it)
// is written with each bad byte replaced by U+FFFD, so any input renders to a parseable page.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace packrat::metrics {

// The Content-Type a /metrics response must carry.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram".
std::string_view MetricTypeName(MetricType type);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus itself).
bool IsValidLabelName(std::string_view name);

// Escapes `\` as `\\` and newline as `\n`.
void AppendEscapedHelp(std::string_view help, std::string* out);
// Escapes `\` as `\\`, `"` as `\"` and newline as `\n`.
void AppendEscapedLabelValue(std::string_view value, std::string* out);

// Shortest text that reads back as the same double ("3", "0.25", "1e-05"); "+Inf", "-Inf", "NaN".
void AppendDouble(double value, std::string* out);

// `a="x",b="y"` (no braces) for label names and values of equal length.
std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values);

// One sample line: `<name><suffix>{<labels>,<extra>} <value>\n`. `labels` comes from
// FormatLabels; `extra` is one more pre-formatted pair (a histogram's `le="0.5"`) or empty; the
// braces are left out when both are empty.
void AppendSample(std::string_view name, std::string_view suffix, std::string_view labels,
                  std::string_view extra, double value, std::string* out);
void AppendSample(std::string_view name, std::string_view suffix, std::string_view labels,
                  std::string_view extra, uint64_t value, std::string* out);

}  // namespace packrat::metrics
