#include "agent/metrics/callback_gauge.h"

#include <prometheus/client_metric.h>

#include <utility>

namespace packrat::metrics {

CallbackHandle& CallbackHandle::operator=(CallbackHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    family_ = std::exchange(other.family_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void CallbackHandle::Reset() {
  if (family_ != nullptr) family_->Unbind(id_);
  family_ = nullptr;
}

CallbackHandle CallbackFamily::Handle(CallbackFamily* family, uint64_t id) {
  return CallbackHandle(family, id);
}

CallbackHandle CallbackGauge::Bind(prometheus::Labels labels, MetricCallback callback) {
  MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  series_.emplace(id, Series{std::move(labels), std::move(callback)});
  return Handle(this, id);
}

void CallbackGauge::Unbind(uint64_t id) {
  MutexLock lock(&mu_);  // waits for a scrape in progress: the callback is not running after
  series_.erase(id);
}

std::vector<prometheus::MetricFamily> CallbackGauge::Collect() const {
  prometheus::MetricFamily family;
  family.name = name_;
  family.help = help_;
  family.type =
      type_ == Type::kCounter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
  MutexLock lock(&mu_);
  for (const auto& [id, series] : series_) {
    const std::optional<double> value = series.callback();
    if (!value) continue;
    prometheus::ClientMetric metric;
    for (const auto& [name, label_value] : series.labels)
      metric.label.push_back({name, label_value});
    if (type_ == Type::kCounter) {
      metric.counter.value = *value;
    } else {
      metric.gauge.value = *value;
    }
    family.metric.push_back(std::move(metric));
  }
  if (family.metric.empty()) return {};
  return {std::move(family)};
}

}  // namespace packrat::metrics
