#include "agent/model/dispatch_metrics.h"

namespace packrat {

DispatchObserver MetricsObserver(metrics::ModelMetrics* m) {
  if (m == nullptr) return {};
  DispatchObserver observer;
  observer.dispatched = [m](const Batch& batch, SteadyTime now) {
    for (const auto& request : batch.requests) {
      m->queue_duration().Observe(std::chrono::duration<double>(now - request->arrival()).count());
      m->statistics().RecordQueued(now - request->arrival());
    }
  };
  observer.finished = [m](int64_t, std::chrono::duration<double> took) {
    m->RecordBatchLatency(took.count());
  };
  return observer;
}

}  // namespace packrat
