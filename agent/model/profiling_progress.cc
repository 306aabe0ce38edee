#include "agent/model/profiling_progress.h"

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace packrat {

std::string FormatDuration(double seconds) {
  const int64_t s = std::max<int64_t>(0, std::llround(seconds));
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(text, sizeof(text), "%llds", static_cast<long long>(s));
  }
  return text;
}

ProfilingProgress::ProfilingProgress(std::string model, metrics::ModelMetrics* metrics,
                                     Clock* clock, std::chrono::milliseconds log_every)
    : model_(std::move(model)), metrics_(metrics), clock_(clock), log_every_(log_every) {
  thread_ = std::thread([this] { Loop(); });
}

ProfilingProgress::~ProfilingProgress() { Finish(); }

void ProfilingProgress::Update(const ProfileProgress& p) {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    last_ = p;
    last_at_ = clock_->Now();
    started_ = true;
  }
  if (metrics_ && p.total > 0) {
    metrics_->profile_progress().Set(static_cast<double>(p.done) / p.total);
  }
}

void ProfilingProgress::Finish(bool complete) {
  {
    MutexLock lock(&mu_);
    finished_ = true;
  }
  if (complete && metrics_) metrics_->profile_progress().Set(1);
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

std::string ProfilingProgress::Status() const {
  MutexLock lock(&mu_);
  return StatusLocked(clock_->Now());
}

std::string ProfilingProgress::StatusLocked(SteadyTime now) const {
  if (!started_ || finished_) return "";
  const double since = std::chrono::duration<double>(now - last_at_).count();
  return "profiling " + std::to_string(last_.done) + "/" + std::to_string(last_.total) +
         " points, ETA " + FormatDuration(std::max(0.0, last_.eta_s - since));
}

void ProfilingProgress::Loop() {
  MutexLock lock(&mu_);
  SteadyTime next = clock_->Now() + log_every_;
  while (!finished_) {
    if (clock_->WaitUntil(&cv_, &mu_, next) || finished_) continue;
    const SteadyTime now = clock_->Now();
    next = now + log_every_;
    if (!started_) continue;  // the first point is still running: nothing to tell yet
    const double elapsed =
        last_.elapsed_s + std::chrono::duration<double>(now - last_at_).count();
    PACKRAT_LOG(INFO) << "model '" << model_ << "': " << StatusLocked(now) << " (last: t="
                      << last_.threads << ", b=" << last_.batch << ", " << last_.latency_ms
                      << " ms), elapsed " << FormatDuration(elapsed);
  }
}

}  // namespace packrat
