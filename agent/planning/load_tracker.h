// LoadTracker: what the autoscaling policy knows of a model's load — the batch-size estimator
// over the rows in the system (packrat-paper §3.8) and the arrival rate of rows — sampled
// together, at the estimator's sample period.
//
// Time: no clock and no thread; callers pass `now` (the model's control thread passes its
// Clock's time, tests hand-made time points). Thread-safety: none; one owner.
#pragma once

#include <cstdint>

#include "agent/planning/arrival_rate.h"
#include "agent/planning/batch_size_estimator.h"

namespace packrat {

class LoadTracker {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // `rate_horizon`: the longest span the arrival rate is asked over (ArrivalRate).
  LoadTracker(const BatchSizeEstimator::Options& estimator, ArrivalRate::Duration rate_horizon)
      : estimator_(estimator), arrivals_(rate_horizon) {}

  // Reports the rows in the system (queued or running, not answered: for a generative model,
  // sequences) and the running total of rows that arrived, at `now`. Returns whether the
  // estimator took the sample (at most one per sample period); only then is the arrival counter
  // sampled and rows_in_system() updated.
  bool Sample(SteadyTime now, int64_t rows_in_system, int64_t rows_arrived) {
    if (!estimator_.Sample(now, rows_in_system)) return false;
    arrivals_.Sample(now, rows_arrived);
    rows_in_system_ = rows_in_system;
    return true;
  }
  // Forgets both histories (a plan set from outside: what was seen under the old one is stale).
  void Restart() {
    estimator_.Restart();
    arrivals_.Restart();
  }

  // The rows in the system at the last taken sample.
  int64_t rows_in_system() const { return rows_in_system_; }
  BatchSizeEstimator& estimator() { return estimator_; }
  const BatchSizeEstimator& estimator() const { return estimator_; }
  ArrivalRate& arrivals() { return arrivals_; }
  const ArrivalRate& arrivals() const { return arrivals_; }

 private:
  BatchSizeEstimator estimator_;
  ArrivalRate arrivals_;
  int64_t rows_in_system_ = 0;
};

}  // namespace packrat
