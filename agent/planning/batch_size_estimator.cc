#include "agent/planning/batch_size_estimator.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <string>
#include <utility>

namespace packrat {
namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && std::has_single_bit(static_cast<uint64_t>(v)); }

size_t Log2(int64_t power_of_two) {
  return static_cast<size_t>(std::countr_zero(static_cast<uint64_t>(power_of_two)));
}

}  // namespace

Status BatchSizeEstimator::Validate(const Options& options) {
  if (!(options.alpha > 0.0 && options.alpha <= 1.0)) {
    return InvalidArgument("estimator alpha must be in (0, 1], got " +
                           std::to_string(options.alpha));
  }
  if (options.window < 1) {
    return InvalidArgument("estimator window must be at least 1, got " +
                           std::to_string(options.window));
  }
  if (options.sample_period <= Duration::zero()) {
    return InvalidArgument("estimator sample_period must be positive");
  }
  if (options.reconfiguration_timeout <= Duration::zero()) {
    return InvalidArgument("estimator reconfiguration_timeout must be positive");
  }
  if (!(options.keep_share >= 0.0 && options.keep_share < 1.0)) {
    return InvalidArgument("estimator keep_share must be in [0, 1), got " +
                           std::to_string(options.keep_share));
  }
  if (!IsPowerOfTwo(options.min_batch)) {
    return InvalidArgument("estimator min_batch must be a power of two, got " +
                           std::to_string(options.min_batch));
  }
  if (!IsPowerOfTwo(options.max_batch)) {
    return InvalidArgument("estimator max_batch must be a power of two, got " +
                           std::to_string(options.max_batch));
  }
  if (options.max_batch < options.min_batch) {
    return InvalidArgument("estimator max_batch (" + std::to_string(options.max_batch) +
                           ") is below min_batch (" + std::to_string(options.min_batch) + ")");
  }
  return Status::Ok();
}

StatusOr<BatchSizeEstimator> BatchSizeEstimator::Create(const Options& options) {
  RETURN_IF_ERROR(Validate(options));
  return BatchSizeEstimator(options);
}

BatchSizeEstimator::BatchSizeEstimator(const Options& options) : options_(options) {
  assert(Validate(options).ok());
  window_.reserve(static_cast<size_t>(options.window));
}

void BatchSizeEstimator::Restart() { *this = BatchSizeEstimator(options_); }

bool BatchSizeEstimator::Sample(SteadyTime now, int64_t queue_depth) {
  if (last_sample_.has_value() && now - *last_sample_ < options_.sample_period) return false;
  const double q = static_cast<double>(queue_depth < 0 ? 0 : queue_depth);
  if (!last_sample_.has_value()) {
    ewma_ = q;
    next_decision_ = now + options_.reconfiguration_timeout;
  } else {
    // α·Q + (1 − α)·Q̂ written as an increment: a constant depth leaves the average exact.
    ewma_ += options_.alpha * (q - ewma_);
  }
  last_sample_ = now;
  ++samples_;

  const int64_t estimate = Estimate();
  if (window_.size() < static_cast<size_t>(options_.window)) {
    window_.push_back(estimate);
  } else {
    --counts_[Log2(window_[next_slot_])];
    window_[next_slot_] = estimate;
    next_slot_ = (next_slot_ + 1) % window_.size();
  }
  ++counts_[Log2(estimate)];
  return true;
}

int64_t BatchSizeEstimator::Estimate() const {
  const double depth = std::floor(ewma_ + 0.5);  // whole requests, see the header
  int64_t b = options_.min_batch;
  while (b < options_.max_batch && static_cast<double>(b * 2) <= depth) b *= 2;
  return b;
}

std::optional<int64_t> BatchSizeEstimator::Smoothed(int64_t current_b) const {
  if (window_.size() < static_cast<size_t>(options_.window)) return std::nullopt;
  int64_t best = 0;
  int64_t best_count = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {  // ascending b: ties keep the smaller
    if (counts_[i] > best_count) {
      best = int64_t{1} << i;
      best_count = counts_[i];
    }
  }
  if (options_.keep_share > 0.0 && IsPowerOfTwo(current_b) && Log2(current_b) < counts_.size() &&
      counts_[Log2(current_b)] == best_count) {
    return current_b;
  }
  return best;
}

std::optional<int64_t> BatchSizeEstimator::Decide(SteadyTime now, int64_t current_b) {
  const std::optional<int64_t> proposed = Proposed(now, current_b);
  if (!last_sample_.has_value() || now < next_decision_) return std::nullopt;
  // Advance to the first grid point after `now`; missed ones are skipped, not replayed.
  next_decision_ += ((now - next_decision_) / options_.reconfiguration_timeout + 1) *
                    options_.reconfiguration_timeout;
  return proposed;
}

std::optional<int64_t> BatchSizeEstimator::Proposed(SteadyTime now, int64_t current_b) const {
  if (!last_sample_.has_value() || now < next_decision_) return std::nullopt;
  const std::optional<int64_t> smoothed = Smoothed(current_b);
  if (!smoothed.has_value() || *smoothed == current_b) return std::nullopt;
  if (options_.keep_share > 0.0 && IsPowerOfTwo(current_b) && Log2(current_b) < counts_.size() &&
      static_cast<double>(counts_[Log2(current_b)]) >=
          options_.keep_share * static_cast<double>(window_.size())) {
    return std::nullopt;  // hysteresis: B is still common enough to keep
  }
  return smoothed;
}

std::optional<BatchSizeEstimator::SteadyTime> BatchSizeEstimator::next_sample_time() const {
  if (!last_sample_.has_value()) return std::nullopt;
  return *last_sample_ + options_.sample_period;
}

std::optional<BatchSizeEstimator::SteadyTime> BatchSizeEstimator::next_decision_time() const {
  if (!last_sample_.has_value()) return std::nullopt;
  return next_decision_;
}

int64_t FloorPowerOfTwo(int64_t x) {
  int64_t p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}

}  // namespace packrat
