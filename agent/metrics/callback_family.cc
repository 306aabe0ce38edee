#include "agent/metrics/callback_family.h"

#include <exception>
#include <utility>

namespace packrat::metrics {

CallbackHandle::CallbackHandle(CallbackHandle&& other) noexcept
    : family_(std::exchange(other.family_, nullptr)),
      values_(std::move(other.values_)),
      id_(other.id_) {}

CallbackHandle& CallbackHandle::operator=(CallbackHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    family_ = std::exchange(other.family_, nullptr);
    values_ = std::move(other.values_);
    id_ = other.id_;
  }
  return *this;
}

void CallbackHandle::Reset() {
  if (family_ == nullptr) return;
  family_->Unbind(values_, id_);
  family_ = nullptr;
}

CallbackHandle CallbackFamily::Bind(const LabelValues& values, MetricCallback callback) {
  CheckArity(values);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  series_[values] = Series{id, std::move(callback), FormatLabels(label_names(), values)};
  return CallbackHandle(this, values, id);
}

void CallbackFamily::Unbind(const LabelValues& values, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(values);
  if (it != series_.end() && it->second.id == id) series_.erase(it);
}

void CallbackFamily::AppendTo(std::string* out) const {
  std::string samples;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [values, series] : series_) {
      std::optional<double> value;
      try {
        value = series.callback();
      } catch (const std::exception&) {
        value.reset();  // a failing source leaves its series out of this scrape
      }
      if (value.has_value()) AppendSample(name(), "", series.labels, "", *value, &samples);
    }
  }
  AppendWithHeader(samples, out);
}

}  // namespace packrat::metrics
