// RuntimeProcessMetrics: each runtime process's CPU time and memory, read from /proc at scrape
// time, per model:
//
//   packrat_runtime_cpu_seconds_total{model,pid}        user + system CPU time     (counter)
//   packrat_runtime_resident_memory_bytes{model,pid}    resident set size          (gauge)
//
// A model binds the callback that lists its runtimes' pids (serving, draining and parked); a
// series lives as long as its process (a new runtime is a new pid: a new series). A pid whose
// files cannot be read (it just exited) is left out of that scrape; it never fails the page.
// Sum by model for a model's share of the node.
//
// Callbacks run on the scraping thread with the family's mutex held: they must be quick and must
// not call into the metrics. Lifetime and unbinding: as CallbackGauge's (callback_gauge.h).
// Thread-safety: Bind, handles and Collect() from any thread.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/metrics/callback_gauge.h"
#include "common/mutex.h"

namespace packrat::metrics {

class RuntimeProcessMetrics final : public prometheus::Collectable, public CallbackFamily {
 public:
  using PidsCallback = std::function<std::vector<pid_t>()>;

  // Reads <proc_root>/<pid>/stat; an empty root exports nothing.
  explicit RuntimeProcessMetrics(std::string proc_root) : proc_root_(std::move(proc_root)) {}

  // Exports the processes `pids` lists at each scrape as model `model`'s runtimes.
  CallbackHandle Bind(std::string model, PidsCallback pids) EXCLUDES(mu_);

  std::vector<prometheus::MetricFamily> Collect() const override EXCLUDES(mu_);

 private:
  void Unbind(uint64_t id) override EXCLUDES(mu_);

  struct Binding {
    std::string model;
    PidsCallback pids;
  };
  const std::string proc_root_;
  mutable Mutex mu_;
  std::map<uint64_t, Binding> bindings_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace packrat::metrics
