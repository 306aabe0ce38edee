// A realistic AgentMetrics page for the promtool and Prometheus tests: two models with every
// family updated, a model name that needs escaping, and an extra family with an awkward label
// value. (HELP texts are plain: prometheus-cpp 1.0.1 writes HELP unescaped, and ours hold no
// backslash or newline.)
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "agent/metrics/agent_metrics.h"

namespace packrat::metrics::testing {

// A model name with a quote, a backslash, a newline and non-ASCII text.
inline const std::string kAwkwardModel = "we\"ird\\model\nr\xC3\xA9sum\xC3\xA9";

// Fills `metrics` for models "demo" and kAwkwardModel. "demo" gets 42 × 200 and 3 × 503
// requests, request durations {0.004, 0.02, 0.3}, instances {2 threads, batch 4, ready} = 3, a
// predicted batch latency of 0.0125 s; the returned handle binds its queue rows to 5.
inline CallbackHandle Populate(AgentMetrics* metrics) {
  ModelMetrics& demo = metrics->ForModel("demo");
  for (int i = 0; i < 42; ++i) demo.requests(200).Increment();
  for (int i = 0; i < 3; ++i) demo.requests(503).Increment();
  for (double s : {0.004, 0.02, 0.3}) demo.request_duration().Observe(s);
  for (double s : {0.001, 0.002}) demo.queue_duration().Observe(s);
  for (double s : {0.011, 0.012}) demo.compute_duration().Observe(s);
  for (double rows : {4, 8}) demo.batch_size().Observe(rows);
  demo.inflight().Set(2);
  demo.target_batch().Set(8);
  demo.estimated_batch().Set(7.5);
  demo.reconfigurations().Increment();
  demo.runtime_restarts().Increment(0);
  demo.predicted_batch_latency().Set(0.0125);
  demo.measured_batch_latency().Set(0.0131);
  demo.SetInstances({{2, 4, "ready", 3}, {1, 1, "warming", 1}});

  ModelMetrics& awkward = metrics->ForModel(kAwkwardModel);
  awkward.requests(200).Increment();
  awkward.requests(400).Increment();
  awkward.request_duration().Observe(1e-5);
  awkward.request_duration().Observe(100);
  awkward.SetInstances({{1, 32, "draining", 1}});

  prometheus::BuildGauge()
      .Name("packrat_test_escaping_info")
      .Help("HELP with 'quotes', \"double quotes\" and UTF-8: r\xC3\xA9sum\xC3\xA9.")
      .Register(metrics->registry())
      .Add({{"path", "C:\\models\\\"demo\".pt"}})
      .Set(1);
  return demo.BindQueueRows([] { return 5; });
}

}  // namespace packrat::metrics::testing
