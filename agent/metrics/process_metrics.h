// The standard process_* metrics of Prometheus clients, read from /proc at scrape time:
//
//   process_cpu_seconds_total       user + system CPU time           (counter)
//   process_resident_memory_bytes   resident set size                (gauge)
//   process_virtual_memory_bytes    virtual memory size              (gauge)
//   process_open_fds                open file descriptors            (gauge)
//   process_max_fds                 soft limit on open descriptors   (gauge)
//   process_start_time_seconds      start time since the Unix epoch  (gauge)
//
// A file that cannot be read or parsed leaves its metric out of that scrape; it never fails the
// page. `proc_root` is a seam for tests, which point it at a fake tree.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace packrat::metrics {

struct ProcessMetricsOptions {
  std::string proc_root = "/proc";  // reads <root>/self/{stat,fd,limits} and <root>/stat
};

// One reading of /proc; fields are nullopt when their source could not be read.
struct ProcessStats {
  std::optional<double> cpu_seconds;
  std::optional<double> resident_memory_bytes;
  std::optional<double> virtual_memory_bytes;
  std::optional<double> open_fds;
  std::optional<double> max_fds;
  std::optional<double> start_time_seconds;
};

// Reads the statistics of `process` ("self", or a pid) under `proc_root`. Blocks on local file
// reads only.
ProcessStats ReadProcessStats(const std::string& proc_root, const std::string& process = "self");

// The six families as a prometheus-cpp Collectable: every Collect() reads /proc once.
// Thread-safe (stateless).
class ProcessMetrics final : public prometheus::Collectable {
 public:
  explicit ProcessMetrics(ProcessMetricsOptions options) : options_(std::move(options)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const ProcessMetricsOptions options_;
};

}  // namespace packrat::metrics
