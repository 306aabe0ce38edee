// Whether queued rows may join a running batch at a stage boundary (layered batching, the
// lbci-paper's buffer data detection module, §3.3).
//
// For a batch of N_d rows that has run k of x stages for t_done, adding N_add rows whose oldest
// has waited t_wait is predicted to finish at
//
//   t_all = t_wait + t_done + t_add + t_rest                                 (lbci eq. 3)
//   t_add  = N_add·g(N_add)·r[N_add,k]              the new rows through stages 1..k (eq. 4)
//   t_rest = (N_d+N_add)·g(N_d+N_add)·(1 − r[N_d+N_add,k])   all rows through k+1..x (eq. 5)
//
// and is admitted while t_all < t_OPT, the strict budget (stage_profile.h). The policy only
// predicts and judges; which rows are offered (whole requests from the queue's front, in order)
// is the caller's.
//
// Immutable; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "agent/batching/inference_request.h"
#include "agent/batching/instance_executor.h"
#include "agent/planning/stage_profile.h"

namespace packrat {

class TopUpPolicy {
 public:
  struct Prediction {
    double wait_ms = 0, done_ms = 0, add_ms = 0, rest_ms = 0;
    double total_ms() const { return wait_ms + done_ms + add_ms + rest_ms; }
  };

  // `profile`: the stage profile of the instance's thread count; `budget_ms`: t_opt.
  TopUpPolicy(std::shared_ptr<const StageProfile> profile, double budget_ms);

  double budget_ms() const { return budget_ms_; }
  double strict_budget_ms() const { return strict_budget_ms_; }
  // N_opt: how many rows a batch starts with at most.
  int64_t optimal_batch() const { return optimal_batch_; }
  const StageProfile& profile() const { return *profile_; }

  // t_all for adding `add` rows to the running batch described by `query`, the oldest of them
  // having waited `oldest_wait`.
  Prediction Predict(const TopUpQuery& query, int64_t add,
                     std::chrono::nanoseconds oldest_wait) const;
  bool Admits(const Prediction& p) const { return p.total_ms() < strict_budget_ms_; }

 private:
  std::shared_ptr<const StageProfile> profile_;
  double budget_ms_;
  double strict_budget_ms_;
  int64_t optimal_batch_;
};

// The admission test for one query, as a predicate for BatchAggregator/BatchScheduler::
// TakeFront: requests are taken from the queue's front while they are compatible with the
// running batch, fit the room left, and keep the predicted t_all within the strict budget; the
// oldest candidate's wait counts for all (eq. 3). Single use; not thread-safe.
class TopUpAdmission {
 public:
  // `policy` and `query` must outlive the admission.
  TopUpAdmission(const TopUpPolicy& policy, const TopUpQuery& query, SteadyTime now)
      : policy_(policy), query_(query), now_(now) {}

  bool operator()(const InferenceRequest& request, int64_t rows);

  // Whether a candidate was turned away (by the budget, the room left or its shape): the
  // batch is not topped up at this boundary or any later one.
  bool refused() const { return refused_; }
  // The prediction of the last candidate judged (admitted or refused).
  const TopUpPolicy::Prediction& last() const { return last_; }

 private:
  const TopUpPolicy& policy_;
  const TopUpQuery& query_;
  const SteadyTime now_;
  std::optional<std::chrono::nanoseconds> oldest_wait_;
  bool refused_ = false;
  TopUpPolicy::Prediction last_;
};

}  // namespace packrat
