// A value that goes up and down (in-flight requests, the current target batch), exported as TYPE
// gauge. For a value owned by another object, prefer a callback gauge (callback_family.h).
//
// Thread-safety: every method is lock-free and safe from any thread; each update is one atomic
// operation. Obtain instances from Family<Gauge>::WithLabelValues.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "agent/metrics/text_format.h"

namespace packrat::metrics {

class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double delta = 1.0) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Decrement(double delta = 1.0) { value_.fetch_sub(delta, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

  // Appends `<name>{<labels>} <value>`.
  void AppendSamples(std::string_view name, std::string_view labels, std::string* out) const {
    AppendSample(name, "", labels, "", Value(), out);
  }

 private:
  std::atomic<double> value_{0};
};

}  // namespace packrat::metrics
