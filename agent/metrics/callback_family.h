// A gauge or counter family whose values are computed at scrape time by callbacks, for values
// that other objects own (a batcher's queue depth, the process' resident memory).
//
//   CallbackHandle h = family->Bind({"demo"}, [&queue] { return queue.rows(); });
//
// A callback returns the value, or std::nullopt to leave its series out of this scrape (e.g. a
// /proc file that could not be read). Callbacks run on the scraping thread with the family's
// mutex (and the registry's) held, so they must be quick, must not block on I/O other than
// local files, and must not call into the registry.
//
// Lifetime: a series exists while its CallbackHandle lives. Destroying or Reset()ting the handle
// unbinds it; once that returns, the callback is not running and never runs again, so the
// objects it captured may be destroyed. Do not Reset() while holding a lock the callback takes
// (that would deadlock against a concurrent scrape). Handles must not outlive the registry.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "agent/metrics/metric_family.h"

namespace packrat::metrics {

using MetricCallback = std::function<std::optional<double>()>;

class CallbackFamily;

// Move-only owner of one bound callback.
class [[nodiscard]] CallbackHandle {
 public:
  CallbackHandle() = default;
  ~CallbackHandle() { Reset(); }
  CallbackHandle(CallbackHandle&& other) noexcept;
  CallbackHandle& operator=(CallbackHandle&& other) noexcept;
  CallbackHandle(const CallbackHandle&) = delete;
  CallbackHandle& operator=(const CallbackHandle&) = delete;

  // Unbinds the callback (see the file comment); a no-op for an empty handle.
  void Reset();
  bool bound() const { return family_ != nullptr; }

 private:
  friend class CallbackFamily;
  CallbackHandle(CallbackFamily* family, LabelValues values, uint64_t id)
      : family_(family), values_(std::move(values)), id_(id) {}

  CallbackFamily* family_ = nullptr;
  LabelValues values_;
  uint64_t id_ = 0;
};

class CallbackFamily final : public MetricFamily {
 public:
  // Use MetricsRegistry::AddCallbackGauge / AddCallbackCounter. `type` is kGauge or kCounter.
  CallbackFamily(MetricOptions options, MetricType type) : MetricFamily(std::move(options), type) {}

  // Makes `callback` the source of the series with these label values. Binding values that are
  // already bound replaces the earlier callback (whose handle then unbinds nothing). Aborts on a
  // wrong number of values (see MetricFamily::CheckArity).
  CallbackHandle Bind(const LabelValues& values, MetricCallback callback);

  void AppendTo(std::string* out) const override;

 private:
  friend class CallbackHandle;
  void Unbind(const LabelValues& values, uint64_t id);

  struct Series {
    uint64_t id;
    MetricCallback callback;
    std::string labels;  // pre-formatted `a="x",b="y"`
  };

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;                  // GUARDED_BY(mu_)
  std::map<LabelValues, Series> series_;  // GUARDED_BY(mu_)
};

}  // namespace packrat::metrics
