// Serves the Prometheus text exposition of the agent's metrics at GET /metrics, on the
// `server.metrics` address.
#pragma once

#include "agent/http/http_types.h"
#include "agent/metrics/agent_metrics.h"

namespace packrat {

class MetricsHandler : public HttpHandler {
 public:
  // `metrics` is not owned and must outlive the handler.
  explicit MetricsHandler(const metrics::AgentMetrics* metrics) : metrics_(metrics) {}

  void Handle(HttpRequest request, HttpResponder respond) override;

 private:
  const metrics::AgentMetrics* metrics_;
};

}  // namespace packrat
