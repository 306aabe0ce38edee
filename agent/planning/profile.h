// Profile: measured single-instance latencies L[t,b] of one model on one machine.
//
// A profile is the optimizer's only input (paper §3.2): for each profiled point ⟨t,b⟩ it holds
// the mean latency of one instance that runs batches of `b` rows with `t` intra-op threads.
// Any set of points is allowed; profiles usually cover t ∈ 1..T × b ∈ {1,2,4,…}.
//
// On disk a profile is a CSV file with a header line naming its columns (any order):
//
//     threads,batch,latency_ms[,latency_min_ms,latency_max_ms,iterations]
//
// `threads`, `batch` and `latency_ms` are required; the others are optional columns, and an
// empty field in an optional column means "not measured". Blank lines and lines starting with
// '#' are ignored; CRLF line ends and a leading UTF-8 byte-order mark are accepted.
//
// Thread-safety: a Profile is a value. Const methods may be called from any number of threads;
// Add() needs external synchronisation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat {

struct ProfilePoint {
  int threads = 0;          // ≥ 1
  int batch = 0;            // ≥ 1
  double latency_ms = 0.0;  // batch latency (a decoder's: step), finite and > 0; measured:
                            // the mean of the iterations (a decoder's: the median)
  // Optional measurement details; when present, min ≤ latency_ms ≤ max and iterations ≥ 1.
  std::optional<double> latency_min_ms;
  std::optional<double> latency_max_ms;
  std::optional<int64_t> iterations;

  bool operator==(const ProfilePoint&) const = default;
};

class Profile {
 public:
  Profile() = default;  // empty; see Add()

  // Reads and validates a CSV profile. Errors: kNotFound if the file cannot be opened or read;
  // kInvalidArgument "path:line: reason" for a malformed header or row, a non-numeric or
  // non-positive value, min/mean/max out of order, a duplicate ⟨threads,batch⟩, or a file
  // without data rows.
  static StatusOr<Profile> LoadCsv(const std::string& path);

  // As LoadCsv, from text already in memory; `source_name` prefixes error messages.
  static StatusOr<Profile> ParseCsv(std::string_view text, std::string_view source_name);

  // Adds one point. kInvalidArgument if the point violates the field contracts above or
  // ⟨threads,batch⟩ is already present (the profile is left unchanged).
  Status Add(const ProfilePoint& point);

  // The CSV form read by ParseCsv: a header, then one row per point in (threads, batch)
  // order. Optional columns are written only if at least one point has a value for them.
  // Numbers are written in their shortest round-trip form, so ParseCsv(ToCsv()) == *this.
  std::string ToCsv() const;

  // Writes ToCsv() to `path` atomically (a temporary file renamed over `path`), so readers
  // never see a half-written profile. kInternal on I/O failure.
  Status WriteCsv(const std::string& path) const;

  // The mean latency of ⟨threads,batch⟩, or nullopt if that point was not profiled.
  std::optional<double> Latency(int threads, int batch) const;
  // The latency of `rows` rows at `threads` threads where that batch size may not have been
  // profiled: linear between the nearest profiled batch sizes below and above at that thread
  // count, proportional to the nearest one beyond the profiled range. Nullopt if nothing at
  // `threads` was profiled or rows < 1.
  std::optional<double> InterpolatedLatency(int threads, int64_t rows) const;
  // The whole point, or nullptr if not profiled. Valid until the next Add().
  const ProfilePoint* Find(int threads, int batch) const;

  // The largest profiled thread count; 0 for an empty profile.
  int MaxThreads() const;
  // The distinct profiled batch sizes, ascending.
  std::vector<int> Batches() const;

  // All points, sorted by (threads, batch), no two with the same ⟨threads,batch⟩.
  const std::vector<ProfilePoint>& points() const { return points_; }
  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }

  bool operator==(const Profile&) const = default;

 private:
  std::vector<ProfilePoint> points_;  // sorted by (threads, batch), unique
};

}  // namespace packrat
