#include "agent/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "agent/metrics/text_format.h"

namespace packrat::metrics {

Status ValidateBuckets(const BucketBounds& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return InvalidArgument("bucket bound " + std::to_string(i) +
                             " is not finite (+Inf is implicit)");
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return InvalidArgument("bucket bounds must be strictly increasing (bound " +
                             std::to_string(i) + ")");
    }
  }
  return Status::Ok();
}

BucketBounds ExponentialBuckets(double start, double factor, int count) {
  BucketBounds bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

BucketBounds LinearBuckets(double start, double width, int count) {
  BucketBounds bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + width * i);
  return bounds;
}

Histogram::Histogram(std::shared_ptr<const BucketBounds> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_->size() + 1)) {}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_->begin(), bounds_->end(), value) - bounds_->begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot snapshot;
  snapshot.cumulative.reserve(bounds_->size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative.push_back(total);
  }
  snapshot.count = total;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

void Histogram::AppendSamples(std::string_view name, std::string_view labels,
                              std::string* out) const {
  const Snapshot snapshot = Collect();
  std::string le;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    le.assign("le=\"");
    if (i < bounds_->size()) {
      AppendDouble((*bounds_)[i], &le);
    } else {
      le.append("+Inf");
    }
    le.push_back('"');
    AppendSample(name, "_bucket", labels, le, snapshot.cumulative[i], out);
  }
  AppendSample(name, "_sum", labels, "", snapshot.sum, out);
  AppendSample(name, "_count", labels, "", snapshot.count, out);
}

}  // namespace packrat::metrics
