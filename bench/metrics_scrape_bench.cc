// What one scrape of GET /metrics costs the agent: AgentMetrics::Render() for a node of 8 models
// with 64 instances between them (8 each: serving, draining and parked states), every family
// populated, the queue-rows callbacks bound and the process metrics read from /proc.
//
//   metrics_scrape_bench [ITERATIONS]     default 2000
//
// Prints the page size and the min / median / p99 wall time of Render() over the iterations,
// single-threaded (docs/benchmarks.md, "Metrics scrape").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/metrics/agent_metrics.h"

int main(int argc, char** argv) {
  using namespace packrat::metrics;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 2000;
  auto created = AgentMetrics::Create();
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  AgentMetrics& metrics = **created;
  std::vector<CallbackHandle> handles;
  for (int m = 0; m < 8; ++m) {
    ModelMetrics& model = metrics.ForModel("model-" + std::to_string(m));
    for (int code : {200, 400, 429, 503}) model.requests(code).Increment(100 + code);
    for (int i = 0; i < 100; ++i) {
      model.request_duration().Observe(0.001 * i);
      model.queue_duration().Observe(0.0005 * i);
      model.compute_duration().Observe(0.0007 * i);
      model.batch_size().Observe(1 + i % 32);
    }
    model.inflight().Set(3);
    model.target_batch().Set(16);
    model.estimated_batch().Set(16);
    model.reconfigurations().Increment(4);
    model.reconfiguration_duration().Observe(1.5);
    model.generation().Set(5);
    model.predicted_batch_latency().Set(0.02);
    model.measured_batch_latency().Set(0.021);
    model.SetKernel("kernel=fp32 checked=1 max_rel_error=0 top1_agreement=1", "fp32");
    // 8 instances: 4 serving ⟨t=2,b=4⟩, 2 draining ⟨t=4,b=8⟩, 2 parked ⟨t=1,b=2⟩.
    model.SetInstances({{2, 4, "ready", 4}, {4, 8, "draining", 2}, {1, 2, "parked", 2}});
    handles.push_back(model.BindQueueRows([m] { return 1.0 * m; }));
  }
  std::vector<double> us;
  size_t bytes = 0;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::string page = metrics.Render();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    bytes = page.size();
  }
  std::sort(us.begin(), us.end());
  std::printf("page %zu bytes; Render() over %d scrapes: min %.0f us, median %.0f us, p99 %.0f us\n",
              bytes, iterations, us.front(), us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
