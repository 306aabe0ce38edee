// The dispatcher's hooks that feed a model's metrics: every request's time in the queue, and
// every whole batch's latency (ModelMetrics::RecordBatchLatency: an average shown next to the
// plan's predicted latency, how far reality is from the profile).
#pragma once

#include "agent/batching/dispatcher.h"
#include "agent/metrics/agent_metrics.h"

namespace packrat {

// An observer for the dispatchers of the model whose series are `metrics` (not owned; outlives
// the dispatchers); empty where `metrics` is null. Thread-safe.
DispatchObserver MetricsObserver(metrics::ModelMetrics* metrics);

}  // namespace packrat
