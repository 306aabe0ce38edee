// Rule 0 of the autoscaling policy (autoscaler.h): behind, observed — a queue whose oldest row
// waits too long for a whole window moves the model to the plan of most capacity.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "agent/planning/autoscaler.h"

namespace packrat {

double Autoscaler::BehindWaitMs(const ServingView& view) const {
  const PlanEvaluator eval = Evaluator(view);
  double batch_ms = eval.PredictedLatencyMs(ServingPlan(view));
  if (view.backlog_batch > view.batch) {
    const std::optional<double> rows_per_s =
        eval.CapacityOn(ThreadCounts(view.groups), view.backlog_batch);
    if (rows_per_s && *rows_per_s > 0) {
      batch_ms = std::max(batch_ms, 1e3 * static_cast<double>(view.backlog_batch) / *rows_per_s);
    }
  }
  const double keeps_up =
      std::chrono::duration<double, std::milli>(options_.evaluation.max_delay).count() +
      options_.evaluation.max_inflight_batches * batch_ms;
  return 2 * std::max(keeps_up, options_.p99_target_ms);
}

std::optional<Autoscaler::PlanChoice> Autoscaler::MostCapacity(const ServingView& view) const {
  const Candidates candidates(*this, view, std::nullopt, /*bounded=*/false);
  // From no batch at all up to max_batch: the smallest B near the most capacity.
  const std::optional<int64_t> b = StepUpBatch(
      0, options_.max_batch, [&candidates](int64_t b) { return candidates.Capacity(b); });
  if (!b) return std::nullopt;
  return candidates.At(*b);
}

bool Autoscaler::CatchUp(const Inputs& in, Decision* d) const {
  if (!in.view.adaptive) return false;
  const ServingView& view = in.view;
  const SteadyTime now = in.now;
  const auto window = std::chrono::milliseconds(options_.overload_window_ms);
  if (window.count() <= 0 || optimizer_ == nullptr || options_.generative || view.groups.empty()) {
    return false;
  }
  const double bound = BehindWaitMs(view);
  if (view.oldest_wait_ms <= bound) {
    d->next.behind_since.reset();
    return false;
  }
  // Behind since the oldest row's wait passed the bound (it has waited since then), but not
  // before the last move: the serving set's window starts when it serves.
  const SteadyTime crossed =
      now - std::chrono::duration_cast<SteadyTime::duration>(
                std::chrono::duration<double, std::milli>(view.oldest_wait_ms - bound));
  std::optional<SteadyTime>& since = d->next.behind_since;
  if (!since) since = std::max(crossed, in.state.last_applied);
  if (now - *since < window) return false;
  Reason r;
  r.from_batch = view.batch;
  r.oldest_wait_ms = view.oldest_wait_ms;
  r.behind_wait_ms = bound;
  r.serving_capacity = ServingCapacity(view);
  std::optional<PlanChoice> target = MostCapacity(view);
  std::ostringstream text;
  text.precision(3);
  text << "behind: the oldest queued row has waited " << view.oldest_wait_ms << " ms, beyond "
       << bound << " ms for " << window.count() << " ms; the plan for B=" << view.batch
       << " serves " << *r.serving_capacity << " rows/s";
  if (!target || target->capacity <= *r.serving_capacity) {
    r.rule = Rule::kBehindAtMostCapacity;
    r.quiet = true;
    text << ", and no plan serves more";
    r.text = text.str();
    Hold(std::move(r), d);
    return false;
  }
  r.rule = Rule::kBehind;
  r.to_batch = target->plan.batch;
  r.target_capacity = target->capacity;
  r.passed_over = target->passed_over;
  text << "; B " << view.batch << " -> " << target->plan.batch << " serves " << target->capacity
       << " (the most capacity)"
       << PassedOverNote(target->plan, target->passed_over, options_.restart_margin, false);
  r.text = text.str();
  d->move = Move{target->plan, std::move(r), now};
  d->restart_arrivals = true;  // the arrivals seen while behind hid the load
  return true;
}

}  // namespace packrat
