#include "agent/metrics/metrics_registry.h"

#include <utility>

namespace packrat::metrics {
namespace {

std::vector<std::string> SampleNames(const std::string& name, MetricType type) {
  if (type == MetricType::kHistogram) {
    return {name, name + "_bucket", name + "_sum", name + "_count"};
  }
  return {name};
}

Status ValidateOptions(const MetricOptions& options, MetricType type) {
  if (!IsValidMetricName(options.name)) {
    return InvalidArgument("invalid metric name \"" + options.name +
                           "\" (want [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::set<std::string, std::less<>> seen;
  for (const std::string& label : options.label_names) {
    if (!IsValidLabelName(label)) {
      return InvalidArgument(options.name + ": invalid label name \"" + label +
                             "\" (want [a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    }
    if (type == MetricType::kHistogram && label == "le") {
      return InvalidArgument(options.name + ": a histogram may not have a label named le");
    }
    if (!seen.insert(label).second) {
      return InvalidArgument(options.name + ": duplicate label name \"" + label + "\"");
    }
  }
  return Status::Ok();
}

}  // namespace

Status MetricsRegistry::Reserve(const MetricOptions& options, MetricType type) {
  RETURN_IF_ERROR(ValidateOptions(options, type));
  const std::vector<std::string> names = SampleNames(options.name, type);
  for (const std::string& name : names) {
    if (sample_names_.count(name) != 0) {
      return AlreadyExists("metric " + options.name + ": the name " + name +
                           " is already used by another family");
    }
  }
  sample_names_.insert(names.begin(), names.end());
  return Status::Ok();
}

template <typename F>
F* MetricsRegistry::Adopt(std::unique_ptr<F> family) {
  F* raw = family.get();
  families_.push_back(std::move(family));
  return raw;
}

StatusOr<Family<Counter>*> MetricsRegistry::AddCounter(MetricOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Reserve(options, MetricType::kCounter));
  return Adopt(std::make_unique<Family<Counter>>(std::move(options), MetricType::kCounter,
                                                 [] { return std::make_unique<Counter>(); }));
}

StatusOr<Family<Gauge>*> MetricsRegistry::AddGauge(MetricOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Reserve(options, MetricType::kGauge));
  return Adopt(std::make_unique<Family<Gauge>>(std::move(options), MetricType::kGauge,
                                               [] { return std::make_unique<Gauge>(); }));
}

StatusOr<Family<Histogram>*> MetricsRegistry::AddHistogram(MetricOptions options,
                                                           BucketBounds bounds) {
  Status valid = ValidateBuckets(bounds);
  if (!valid.ok()) return valid.WithContext(options.name);
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Reserve(options, MetricType::kHistogram));
  auto shared = std::make_shared<const BucketBounds>(std::move(bounds));
  return Adopt(std::make_unique<Family<Histogram>>(
      std::move(options), MetricType::kHistogram,
      [shared] { return std::make_unique<Histogram>(shared); }));
}

StatusOr<CallbackFamily*> MetricsRegistry::AddCallbackGauge(MetricOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Reserve(options, MetricType::kGauge));
  return Adopt(std::make_unique<CallbackFamily>(std::move(options), MetricType::kGauge));
}

StatusOr<CallbackFamily*> MetricsRegistry::AddCallbackCounter(MetricOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Reserve(options, MetricType::kCounter));
  return Adopt(std::make_unique<CallbackFamily>(std::move(options), MetricType::kCounter));
}

std::string MetricsRegistry::Render() const {
  std::string page;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& family : families_) family->AppendTo(&page);
  return page;
}

}  // namespace packrat::metrics
