#include "agent/planning/profile.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "common/atomic_file.h"

namespace packrat {
namespace {

enum Column { kThreads, kBatch, kLatency, kLatencyMin, kLatencyMax, kIterations, kNumColumns };
constexpr std::array<std::string_view, kNumColumns> kColumnNames = {
    "threads", "batch", "latency_ms", "latency_min_ms", "latency_max_ms", "iterations"};
constexpr std::string_view kExpectedHeader =
    "threads,batch,latency_ms[,latency_min_ms,latency_max_ms,iterations]";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    size_t comma = line.find(',');
    fields.push_back(Trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return fields;
}

// Parses all of `text` as a decimal integer; nullopt on anything else (sign, junk, overflow).
template <typename Int>
std::optional<Int> ParseInteger(std::string_view text) {
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Parses all of `text` as a finite floating-point number.
std::optional<double> ParseDouble(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

std::string FormatDouble(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "nan";  // unreachable for finite doubles and a 64-byte buffer
  return std::string(buf, end);
}

// Checks the field contracts of ProfilePoint; the message names the offending field.
Status ValidatePoint(const ProfilePoint& p) {
  if (p.threads < 1)
    return InvalidArgument("threads must be >= 1, got " + std::to_string(p.threads));
  if (p.batch < 1) return InvalidArgument("batch must be >= 1, got " + std::to_string(p.batch));
  if (!std::isfinite(p.latency_ms) || p.latency_ms <= 0) {
    return InvalidArgument("latency_ms must be finite and > 0, got " + FormatDouble(p.latency_ms));
  }
  if (p.latency_min_ms.has_value()) {
    if (!std::isfinite(*p.latency_min_ms) || *p.latency_min_ms <= 0) {
      return InvalidArgument("latency_min_ms must be finite and > 0, got " +
                             FormatDouble(*p.latency_min_ms));
    }
    if (*p.latency_min_ms > p.latency_ms) {
      return InvalidArgument("latency_min_ms " + FormatDouble(*p.latency_min_ms) +
                             " exceeds latency_ms " + FormatDouble(p.latency_ms));
    }
  }
  if (p.latency_max_ms.has_value()) {
    if (!std::isfinite(*p.latency_max_ms) || *p.latency_max_ms <= 0) {
      return InvalidArgument("latency_max_ms must be finite and > 0, got " +
                             FormatDouble(*p.latency_max_ms));
    }
    if (*p.latency_max_ms < p.latency_ms) {
      return InvalidArgument("latency_max_ms " + FormatDouble(*p.latency_max_ms) +
                             " is below latency_ms " + FormatDouble(p.latency_ms));
    }
  }
  if (p.iterations.has_value() && *p.iterations < 1) {
    return InvalidArgument("iterations must be >= 1, got " + std::to_string(*p.iterations));
  }
  return Status::Ok();
}

bool KeyLess(const ProfilePoint& a, int threads, int batch) {
  return a.threads != threads ? a.threads < threads : a.batch < batch;
}

std::string PointName(int threads, int batch) {
  return "threads=" + std::to_string(threads) + " batch=" + std::to_string(batch);
}

// Parses the header line into the column index of each field; -1 for absent optional columns.
StatusOr<std::array<int, kNumColumns>> ParseHeader(std::string_view line, size_t* num_fields) {
  std::array<int, kNumColumns> index;
  index.fill(-1);
  std::vector<std::string_view> fields = SplitFields(line);
  for (size_t i = 0; i < fields.size(); ++i) {
    auto it = std::find(kColumnNames.begin(), kColumnNames.end(), fields[i]);
    if (it == kColumnNames.end()) {
      return InvalidArgument("bad header: unknown column '" + std::string(fields[i]) +
                             "' (expected " + std::string(kExpectedHeader) + ")");
    }
    int column = static_cast<int>(it - kColumnNames.begin());
    if (index[column] != -1) {
      return InvalidArgument("bad header: column '" + std::string(fields[i]) + "' appears twice");
    }
    index[column] = static_cast<int>(i);
  }
  for (int required : {kThreads, kBatch, kLatency}) {
    if (index[required] == -1) {
      return InvalidArgument("bad header: missing column '" + std::string(kColumnNames[required]) +
                             "' (expected " + std::string(kExpectedHeader) + ")");
    }
  }
  *num_fields = fields.size();
  return index;
}

// Parses one data row given the header's column indices.
StatusOr<ProfilePoint> ParseRow(std::string_view line, const std::array<int, kNumColumns>& index,
                                size_t num_fields) {
  std::vector<std::string_view> fields = SplitFields(line);
  if (fields.size() != num_fields) {
    return InvalidArgument("expected " + std::to_string(num_fields) + " fields, got " +
                           std::to_string(fields.size()));
  }
  auto field = [&](Column c) { return fields[index[c]]; };
  auto bad = [&](Column c, std::string_view what) {
    return InvalidArgument(std::string(kColumnNames[c]) + ": '" + std::string(field(c)) +
                           "' is not " + std::string(what));
  };

  ProfilePoint p;
  for (Column c : {kThreads, kBatch}) {
    std::optional<int> v = ParseInteger<int>(field(c));
    if (!v.has_value()) return bad(c, "an integer");
    (c == kThreads ? p.threads : p.batch) = *v;
  }
  std::optional<double> latency = ParseDouble(field(kLatency));
  if (!latency.has_value()) return bad(kLatency, "a finite number");
  p.latency_ms = *latency;
  for (Column c : {kLatencyMin, kLatencyMax}) {
    if (index[c] == -1 || field(c).empty()) continue;
    std::optional<double> v = ParseDouble(field(c));
    if (!v.has_value()) return bad(c, "a finite number");
    (c == kLatencyMin ? p.latency_min_ms : p.latency_max_ms) = *v;
  }
  if (index[kIterations] != -1 && !field(kIterations).empty()) {
    p.iterations = ParseInteger<int64_t>(field(kIterations));
    if (!p.iterations.has_value()) return bad(kIterations, "an integer");
  }
  RETURN_IF_ERROR(ValidatePoint(p));
  return p;
}

}  // namespace

StatusOr<Profile> Profile::LoadCsv(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return NotFound("cannot open profile '" + path + "': " + std::strerror(errno));
  }
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int saved_errno = errno;
  std::fclose(f);
  if (failed) {
    return NotFound("cannot read profile '" + path + "': " + std::strerror(saved_errno));
  }
  return ParseCsv(text, path);
}

StatusOr<Profile> Profile::ParseCsv(std::string_view text, std::string_view source_name) {
  const std::string source(source_name);
  auto at = [&source](int line) { return source + ":" + std::to_string(line); };

  Profile profile;
  std::optional<std::array<int, kNumColumns>> index;
  size_t num_fields = 0;
  std::unordered_map<int64_t, int> first_line;  // (threads << 32 | batch) -> line number
  int line_number = 0;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte-order mark
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = Trim(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;

    if (!index.has_value()) {
      StatusOr<std::array<int, kNumColumns>> header = ParseHeader(line, &num_fields);
      if (!header.ok()) return header.status().WithContext(at(line_number));
      index = *header;
      continue;
    }
    StatusOr<ProfilePoint> point = ParseRow(line, *index, num_fields);
    if (!point.ok()) return point.status().WithContext(at(line_number));
    int64_t key = (static_cast<int64_t>(point->threads) << 32) | point->batch;
    auto [it, inserted] = first_line.emplace(key, line_number);
    if (!inserted) {
      return InvalidArgument(at(line_number) + ": duplicate point " +
                             PointName(point->threads, point->batch) + " (first at line " +
                             std::to_string(it->second) + ")");
    }
    profile.points_.push_back(*std::move(point));
  }
  if (!index.has_value()) {
    return InvalidArgument(source + ": empty profile: no header line (expected " +
                           std::string(kExpectedHeader) + ")");
  }
  if (profile.points_.empty()) return InvalidArgument(source + ": profile has no data rows");
  std::sort(
      profile.points_.begin(), profile.points_.end(),
      [](const ProfilePoint& a, const ProfilePoint& b) { return KeyLess(a, b.threads, b.batch); });
  return profile;
}

Status Profile::Add(const ProfilePoint& point) {
  RETURN_IF_ERROR(ValidatePoint(point));
  auto it = std::lower_bound(
      points_.begin(), points_.end(), point,
      [](const ProfilePoint& a, const ProfilePoint& b) { return KeyLess(a, b.threads, b.batch); });
  if (it != points_.end() && it->threads == point.threads && it->batch == point.batch) {
    return InvalidArgument("duplicate point " + PointName(point.threads, point.batch));
  }
  points_.insert(it, point);
  return Status::Ok();
}

std::string Profile::ToCsv() const {
  bool has_min = false, has_max = false, has_iterations = false;
  for (const ProfilePoint& p : points_) {
    has_min |= p.latency_min_ms.has_value();
    has_max |= p.latency_max_ms.has_value();
    has_iterations |= p.iterations.has_value();
  }
  std::string out = "threads,batch,latency_ms";
  if (has_min) out += ",latency_min_ms";
  if (has_max) out += ",latency_max_ms";
  if (has_iterations) out += ",iterations";
  out += '\n';
  for (const ProfilePoint& p : points_) {
    out += std::to_string(p.threads) + ',' + std::to_string(p.batch) + ',' +
           FormatDouble(p.latency_ms);
    if (has_min) out += ',' + (p.latency_min_ms ? FormatDouble(*p.latency_min_ms) : "");
    if (has_max) out += ',' + (p.latency_max_ms ? FormatDouble(*p.latency_max_ms) : "");
    if (has_iterations) out += ',' + (p.iterations ? std::to_string(*p.iterations) : "");
    out += '\n';
  }
  return out;
}

Status Profile::WriteCsv(const std::string& path) const {
  return WriteFileAtomically(path, ToCsv());
}

const ProfilePoint* Profile::Find(int threads, int batch) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), std::pair(threads, batch),
                             [](const ProfilePoint& a, const std::pair<int, int>& k) {
                               return KeyLess(a, k.first, k.second);
                             });
  if (it == points_.end() || it->threads != threads || it->batch != batch) return nullptr;
  return &*it;
}

std::optional<double> Profile::Latency(int threads, int batch) const {
  const ProfilePoint* p = Find(threads, batch);
  if (p == nullptr) return std::nullopt;
  return p->latency_ms;
}

std::optional<double> Profile::InterpolatedLatency(int threads, int64_t rows) const {
  if (rows < 1) return std::nullopt;
  // Points are sorted by (threads, batch): the first at `threads` with batch >= rows, and the
  // one before it. Called for every slice served, so no scan of the whole profile.
  const int batch = static_cast<int>(std::min<int64_t>(rows, std::numeric_limits<int>::max()));
  auto it = std::lower_bound(points_.begin(), points_.end(), std::pair(threads, batch),
                             [](const ProfilePoint& a, const std::pair<int, int>& k) {
                               return KeyLess(a, k.first, k.second);
                             });
  const ProfilePoint* above = it != points_.end() && it->threads == threads ? &*it : nullptr;
  const ProfilePoint* below = nullptr;
  if (above != nullptr && above->batch == rows) {
    below = above;
  } else if (it != points_.begin() && std::prev(it)->threads == threads) {
    below = &*std::prev(it);
  }
  if (below == nullptr && above == nullptr) return std::nullopt;
  if (below == nullptr) return above->latency_ms * static_cast<double>(rows) / above->batch;
  if (above == nullptr) return below->latency_ms * static_cast<double>(rows) / below->batch;
  if (below == above) return below->latency_ms;
  const double f = static_cast<double>(rows - below->batch) / (above->batch - below->batch);
  return below->latency_ms + f * (above->latency_ms - below->latency_ms);
}

int Profile::MaxThreads() const { return points_.empty() ? 0 : points_.back().threads; }

std::vector<int> Profile::Batches() const {
  std::vector<int> batches;
  batches.reserve(points_.size());
  for (const ProfilePoint& p : points_) batches.push_back(p.batch);
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  return batches;
}

}  // namespace packrat
