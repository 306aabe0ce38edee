#include "agent/metrics/runtime_process_metrics.h"

#include <prometheus/client_metric.h>

#include <utility>

#include "agent/metrics/process_metrics.h"

namespace packrat::metrics {

CallbackHandle RuntimeProcessMetrics::Bind(std::string model, PidsCallback pids) {
  MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  bindings_.emplace(id, Binding{std::move(model), std::move(pids)});
  return Handle(this, id);
}

void RuntimeProcessMetrics::Unbind(uint64_t id) {
  MutexLock lock(&mu_);  // waits for a scrape in progress: the callback is not running after
  bindings_.erase(id);
}

std::vector<prometheus::MetricFamily> RuntimeProcessMetrics::Collect() const {
  if (proc_root_.empty()) return {};
  prometheus::MetricFamily cpu;
  cpu.name = "packrat_runtime_cpu_seconds_total";
  cpu.help = "User and system CPU time of a runtime process.";
  cpu.type = prometheus::MetricType::Counter;
  prometheus::MetricFamily rss;
  rss.name = "packrat_runtime_resident_memory_bytes";
  rss.help = "Resident memory of a runtime process.";
  rss.type = prometheus::MetricType::Gauge;
  MutexLock lock(&mu_);
  for (const auto& [id, binding] : bindings_) {
    for (const pid_t pid : binding.pids()) {
      if (pid <= 0) continue;
      const ProcessStats stats = ReadProcessStats(proc_root_, std::to_string(pid));
      const std::vector<prometheus::ClientMetric::Label> labels = {{"model", binding.model},
                                                                   {"pid", std::to_string(pid)}};
      if (stats.cpu_seconds) {
        prometheus::ClientMetric m;
        m.label = labels;
        m.counter.value = *stats.cpu_seconds;
        cpu.metric.push_back(std::move(m));
      }
      if (stats.resident_memory_bytes) {
        prometheus::ClientMetric m;
        m.label = labels;
        m.gauge.value = *stats.resident_memory_bytes;
        rss.metric.push_back(std::move(m));
      }
    }
  }
  std::vector<prometheus::MetricFamily> out;
  if (!cpu.metric.empty()) out.push_back(std::move(cpu));
  if (!rss.metric.empty()) out.push_back(std::move(rss));
  return out;
}

}  // namespace packrat::metrics
