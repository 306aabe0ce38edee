// ProfilingProgress: what a person sees while an `instances: auto` model measures its profile on
// a new node (minutes: about 10 at T = 16 for ResNet-50, readiness false all along) — a log line
// with points done / total, elapsed time and an ETA at least every `log_every`, the metric
// packrat_profile_progress_ratio, and a one-line status for the model's metadata
// ("profiling 37/112 points, ETA 4m10s").
//
// The ETA is the profiler's (the mean time of the points measured so far times the points left),
// counted down between its updates, since one point can take a minute.
//
// Thread-safety: Update and Status may be called from any thread; one thread of its own logs.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "agent/metrics/agent_metrics.h"
#include "agent/profiling/profiler.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace packrat {

class ProfilingProgress {
 public:
  // `metrics` may be null; `clock` is not owned.
  ProfilingProgress(std::string model, metrics::ModelMetrics* metrics, Clock* clock,
                    std::chrono::milliseconds log_every = std::chrono::seconds(10));
  ~ProfilingProgress();  // Finish()es

  // The profiler measured a point (ProfileProgress: done / total, its ETA).
  void Update(const ProfileProgress& p) EXCLUDES(mu_);
  // Profiling is over: the logging stops; with `complete` the metric says 1 (the profile is
  // there, measured or stored), else it stays at the last ratio. Idempotent.
  void Finish(bool complete = false) EXCLUDES(mu_);

  // "profiling 37/112 points, ETA 4m10s" while measuring; "" before the first update and after
  // Finish.
  std::string Status() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  std::string StatusLocked(SteadyTime now) const REQUIRES(mu_);

  const std::string model_;
  metrics::ModelMetrics* const metrics_;
  Clock* const clock_;
  const std::chrono::milliseconds log_every_;
  mutable Mutex mu_;
  CondVar cv_;
  ProfileProgress last_ GUARDED_BY(mu_);
  SteadyTime last_at_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// "4m10s", "52s", "1h03m".
std::string FormatDuration(double seconds);

}  // namespace packrat
