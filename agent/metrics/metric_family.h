// A metric family: one name, HELP text, type and set of label names, holding one series per
// tuple of label values. MetricFamily is what the registry renders; Family<T> (T = Counter,
// Gauge or Histogram) hands out the series that code updates.
//
// Ownership: the MetricsRegistry owns every family and families own their series, so a series
// reference stays valid for the registry's lifetime, even after Remove() (a removed series is
// only hidden).
// Thread-safety: all methods are thread-safe. WithLabelValues/Remove take the family's mutex, so
// hot paths look a series up once and keep the reference; updating it is then lock-free.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/metrics/text_format.h"

namespace packrat::metrics {

struct MetricOptions {
  // [a-zA-Z_:][a-zA-Z0-9_:]*, with a base unit suffix (`_seconds`, `_bytes`) and `_total` for
  // counters, by Prometheus convention.
  std::string name;
  // Free text; escaped on output.
  std::string help;
  // Distinct names, each [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__"; histograms may not
  // use "le". Series are given values for these, in this order.
  std::vector<std::string> label_names;
};

// Label values selecting one series, in the order of MetricOptions::label_names.
using LabelValues = std::vector<std::string>;

class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  const std::string& name() const { return options_.name; }
  const std::string& help() const { return options_.help; }
  const std::vector<std::string>& label_names() const { return options_.label_names; }
  MetricType type() const { return type_; }

  // Appends `# HELP`, `# TYPE` and one block of samples per visible series, ordered by label
  // values; appends nothing when no series has a sample. Thread-safe.
  virtual void AppendTo(std::string* out) const = 0;

 protected:
  MetricFamily(MetricOptions options, MetricType type)
      : options_(std::move(options)), type_(type) {}

  // Appends the HELP and TYPE lines and then `samples`, unless `samples` is empty.
  void AppendWithHeader(const std::string& samples, std::string* out) const;
  // Aborts the process if `values` does not have one value per label name: a programming error
  // that would otherwise produce an unparseable page.
  void CheckArity(const LabelValues& values) const;

 private:
  const MetricOptions options_;
  const MetricType type_;
};

template <typename T>
class Family final : public MetricFamily {
 public:
  using Factory = std::function<std::unique_ptr<T>()>;

  // Use MetricsRegistry::Add*; `make` creates a new series' metric. A family without labels
  // creates its single series at once, so it is exported (as 0) before the first update.
  Family(MetricOptions options, MetricType type, Factory make)
      : MetricFamily(std::move(options), type), make_(std::move(make)) {
    if (label_names().empty()) WithLabelValues({});
  }

  // The series with these label values, created on first use (and made visible again if it was
  // removed). Aborts on a wrong number of values (see CheckArity).
  T& WithLabelValues(const LabelValues& values) {
    CheckArity(values);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(values);
    if (it == series_.end()) {
      Series series{make_(), FormatLabels(label_names(), values), true};
      it = series_.emplace(values, std::move(series)).first;
    }
    it->second.visible = true;
    return *it->second.metric;
  }

  // Stops exporting the series (e.g. an instance configuration that no longer exists). It keeps
  // its value and its references stay valid; WithLabelValues brings it back.
  void Remove(const LabelValues& values) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(values);
    if (it != series_.end()) it->second.visible = false;
  }

  // Remove()s every series whose label values satisfy `pred` (called under the family's mutex;
  // it must not call back into this family).
  void RemoveIf(const std::function<bool(const LabelValues&)>& pred) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [values, series] : series_) {
      if (pred(values)) series.visible = false;
    }
  }

  void AppendTo(std::string* out) const override {
    std::string samples;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [values, series] : series_) {
        if (series.visible) series.metric->AppendSamples(name(), series.labels, &samples);
      }
    }
    AppendWithHeader(samples, out);
  }

 private:
  struct Series {
    std::unique_ptr<T> metric;
    std::string labels;  // pre-formatted `a="x",b="y"`
    bool visible = true;
  };

  const Factory make_;
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;  // GUARDED_BY(mu_)
};

}  // namespace packrat::metrics
