#include "agent/batching/top_up_policy.h"

namespace packrat {

TopUpPolicy::TopUpPolicy(std::shared_ptr<const StageProfile> profile, double budget_ms)
    : profile_(std::move(profile)),
      budget_ms_(budget_ms),
      strict_budget_ms_(profile_->StrictBudgetMs(budget_ms)),
      optimal_batch_(profile_->OptimalBatch(budget_ms)) {}

TopUpPolicy::Prediction TopUpPolicy::Predict(const TopUpQuery& query, int64_t add,
                                             std::chrono::nanoseconds oldest_wait) const {
  Prediction p;
  p.wait_ms = std::chrono::duration<double, std::milli>(oldest_wait).count();
  p.done_ms = std::chrono::duration<double, std::milli>(query.elapsed).count();
  p.add_ms = profile_->PredictThroughMs(add, query.stages_done);
  p.rest_ms = profile_->PredictRestMs(query.rows + add, query.stages_done);
  return p;
}

bool TopUpAdmission::operator()(const InferenceRequest& request, int64_t rows) {
  if (rows > query_.max_rows || (query_.like && !request.CompatibleWith(*query_.like))) {
    refused_ = true;
    return false;
  }
  if (!oldest_wait_) oldest_wait_ = now_ - request.arrival();
  last_ = policy_.Predict(query_, rows, *oldest_wait_);
  if (!policy_.Admits(last_)) {
    refused_ = true;
    return false;
  }
  return true;
}

}  // namespace packrat
