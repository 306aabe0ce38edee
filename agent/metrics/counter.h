// A monotonically increasing value (requests served, restarts), exported as TYPE counter.
//
// Thread-safety: every method is lock-free and safe from any thread; Increment is one atomic
// read-modify-write. Obtain instances from Family<Counter>::WithLabelValues.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "agent/metrics/text_format.h"

namespace packrat::metrics {

class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `delta`. A counter never decreases: negative and NaN deltas are ignored.
  void Increment(double delta = 1.0) {
    if (!(delta >= 0)) return;
    value_.fetch_add(delta, std::memory_order_relaxed);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

  // Appends `<name>{<labels>} <value>`.
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const {
    AppendSample(name, "", labels, "", Value(), out);
  }

 private:
  std::atomic<double> value_{0};
};

}  // namespace packrat::metrics
