// CallbackGauge: a gauge (or counter) family whose values are computed at scrape time by
// callbacks, for values other objects own (a batcher's queue depth) — a prometheus-cpp
// Collectable that AgentMetrics::Render() collects beside its registry.
//
//   CallbackHandle h = family.Bind({{"model", "demo"}}, [&queue] { return queue.rows(); });
//
// A callback returns the value, or std::nullopt to leave its series out of this scrape.
// Callbacks run on the scraping thread with the family's mutex held, so they must be quick, must
// not block beyond local reads and must not call into the metrics.
//
// Lifetime: a series exists while its CallbackHandle lives. Destroying or Reset()ting the handle
// unbinds it; once that returns the callback is not running and never runs again, so what it
// captured may go. Do not Reset() while holding a lock the callback takes (that would deadlock
// against a concurrent scrape). Handles must not outlive their family.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/mutex.h"

namespace packrat::metrics {

using MetricCallback = std::function<std::optional<double>()>;

class CallbackHandle;

// A family of series bound to callbacks: what a CallbackHandle unbinds from.
class CallbackFamily {
 public:
  virtual ~CallbackFamily() = default;

 protected:
  friend class CallbackHandle;
  // Removes binding `id`; once it returns its callback is not running and never runs again.
  virtual void Unbind(uint64_t id) = 0;
  static CallbackHandle Handle(CallbackFamily* family, uint64_t id);
};

// Move-only owner of one bound callback.
class [[nodiscard]] CallbackHandle {
 public:
  CallbackHandle() = default;
  ~CallbackHandle() { Reset(); }
  CallbackHandle(CallbackHandle&& other) noexcept { *this = std::move(other); }
  CallbackHandle& operator=(CallbackHandle&& other) noexcept;
  CallbackHandle(const CallbackHandle&) = delete;
  CallbackHandle& operator=(const CallbackHandle&) = delete;

  // Unbinds the callback (see the class comment). Idempotent.
  void Reset();

 private:
  friend class CallbackFamily;
  CallbackHandle(CallbackFamily* family, uint64_t id) : family_(family), id_(id) {}
  CallbackFamily* family_ = nullptr;
  uint64_t id_ = 0;
};

class CallbackGauge final : public prometheus::Collectable, public CallbackFamily {
 public:
  enum class Type { kGauge, kCounter };
  CallbackGauge(std::string name, std::string help, Type type = Type::kGauge)
      : name_(std::move(name)), help_(std::move(help)), type_(type) {}

  // Adds the series `labels` with the value `callback` returns at each scrape.
  CallbackHandle Bind(prometheus::Labels labels, MetricCallback callback) EXCLUDES(mu_);

  std::vector<prometheus::MetricFamily> Collect() const override EXCLUDES(mu_);

 private:
  void Unbind(uint64_t id) override EXCLUDES(mu_);

  struct Series {
    prometheus::Labels labels;
    MetricCallback callback;
  };
  const std::string name_;
  const std::string help_;
  const Type type_;
  mutable Mutex mu_;
  std::map<uint64_t, Series> series_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace packrat::metrics
