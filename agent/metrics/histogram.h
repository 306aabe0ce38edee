// A distribution of observations (durations in seconds, batch sizes in rows) counted into
// buckets with fixed upper bounds, exported as TYPE histogram:
//
//   <name>_bucket{...,le="<bound>"} <observations <= bound>   (cumulative, one per bound)
//   <name>_bucket{...,le="+Inf"} <all observations>
//   <name>_sum{...} <sum of observations>
//   <name>_count{...} <all observations>
//
// Thread-safety: Observe is lock-free and safe from any thread (a binary search over the bounds,
// one atomic increment of the bucket and one atomic add to the sum). A concurrent scrape may see
// _sum and the buckets a few observations apart; _count always equals the +Inf bucket.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat::metrics {

// Upper bounds for histogram buckets. Valid bounds are finite and strictly increasing (the +Inf
// bucket is implicit); an empty list leaves only +Inf.
using BucketBounds = std::vector<double>;

// OK, or kInvalidArgument naming the first bad bound.
Status ValidateBuckets(const BucketBounds& bounds);
// start, start·factor, ..., `count` bounds (start > 0, factor > 1, count >= 1).
BucketBounds ExponentialBuckets(double start, double factor, int count);
// start, start+width, ..., `count` bounds (width > 0, count >= 1).
BucketBounds LinearBuckets(double start, double width, int count);

class Histogram {
 public:
  // `bounds` must satisfy ValidateBuckets (the family checks it once for all its series).
  explicit Histogram(std::shared_ptr<const BucketBounds> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose bound is >= value. NaN is ignored.
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Collect() const;

  // Appends the _bucket, _sum and _count lines.
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const;

 private:
  const std::shared_ptr<const BucketBounds> bounds_;
  // Per-bucket (not cumulative) counts; the last is the +Inf bucket.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

}  // namespace packrat::metrics
