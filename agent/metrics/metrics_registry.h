// The set of metric families one process exports, and their rendering as a Prometheus text page
// (format 0.0.4; serve it with Content-Type kPrometheusContentType).
//
//   MetricsRegistry registry;
//   ASSIGN_OR_RETURN(Family<Counter>* requests,
//                    registry.AddCounter({"packrat_requests_total", "Requests.", {"model"}}));
//   Counter& demo = requests->WithLabelValues({"demo"});   // once
//   demo.Increment();                                     // hot path: one atomic op
//   std::string page = registry.Render();                 // GET /metrics
//
// Ownership: the registry owns its families; the pointers Add* returns stay valid until the
// registry is destroyed. Thread-safety: every method is thread-safe; families may be added while
// others render. Render() blocks for as long as the callbacks of callback families take.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/metrics/callback_family.h"
#include "agent/metrics/counter.h"
#include "agent/metrics/gauge.h"
#include "agent/metrics/histogram.h"
#include "agent/metrics/metric_family.h"
#include "common/status.h"

namespace packrat::metrics {

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each Add* fails with kInvalidArgument for an invalid name, label name or bucket list, and
  // with kAlreadyExists when a sample name it would write is already written by another family
  // (a histogram "x" writes x_bucket, x_sum and x_count).
  StatusOr<Family<Counter>*> AddCounter(MetricOptions options);
  StatusOr<Family<Gauge>*> AddGauge(MetricOptions options);
  StatusOr<Family<Histogram>*> AddHistogram(MetricOptions options, BucketBounds bounds);
  // Families whose series are callbacks evaluated at scrape time (see callback_family.h).
  StatusOr<CallbackFamily*> AddCallbackGauge(MetricOptions options);
  StatusOr<CallbackFamily*> AddCallbackCounter(MetricOptions options);

  // Every family in the order they were added, as one text page.
  std::string Render() const;

 private:
  // Validates `options` for a family of `type` and reserves its sample names.
  Status Reserve(const MetricOptions& options, MetricType type);  // REQUIRES(mu_)
  template <typename F>
  F* Adopt(std::unique_ptr<F> family);  // REQUIRES(mu_)

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_;  // GUARDED_BY(mu_)
  std::set<std::string, std::less<>> sample_names_;      // GUARDED_BY(mu_)
};

}  // namespace packrat::metrics
