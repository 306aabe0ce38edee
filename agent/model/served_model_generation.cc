// ServedModel's generative entry points (served_model.h): a generative model's sequences go
// to its decoders directly, not through the batch scheduler.
#include <algorithm>
#include <vector>

#include "agent/model/served_model.h"

namespace packrat {

GenerateLimits ServedModel::generate_limits() const {
  GenerateLimits limits;
  limits.max_tokens = config_.generation.max_tokens;
  limits.default_max_tokens = config_.generation.default_max_tokens;
  limits.max_prompt_tokens = config_.generation.max_prompt_tokens;
  if (const std::shared_ptr<InstanceSet> active = sets_.active()) {
    for (const auto& w : active->workers) {
      if (!w->decoder) continue;
      limits.vocab = w->decoder->vocab();
      if (w->decoder->max_len() > 1) {
        limits.max_prompt_tokens = std::min(limits.max_prompt_tokens, w->decoder->max_len() - 1);
      }
      break;
    }
  }
  return limits;
}

Status ServedModel::Generate(std::shared_ptr<GenerateRequest> request,
                             std::function<void()>* cancel) {
  if (!generative()) {
    return FailedPrecondition("model '" + config_.name + "' is not generative; use /infer");
  }
  if (state() != ModelState::kReady) {
    return FailedPrecondition("model '" + config_.name + "' is not ready");
  }
  // A decoder picked from the active set may be stopping when the sequence reaches it (a
  // switch of sets in between): it refuses the sequence, and the next pick, from the set
  // active then, takes it.
  std::vector<std::shared_ptr<Worker>> refused;
  for (;;) {
    std::shared_ptr<Worker> target;
    if (const std::shared_ptr<InstanceSet> active = sets_.active()) {
      // The least loaded decoder for its share b of the plan (MakeSet sets how many it decodes
      // at once; the rest wait in it).
      size_t best = 0;
      for (size_t i = 0; i < active->workers.size(); ++i) {
        const std::shared_ptr<Worker>& w = active->workers[i];
        if (!w->decoder || !w->decoder->alive()) continue;
        if (std::find(refused.begin(), refused.end(), w) != refused.end()) continue;
        const int64_t share = i < active->batches.size() ? active->batches[i] : w->batch;
        const size_t load =
            w->decoder->load() * 1000 / static_cast<size_t>(std::max<int64_t>(1, share));
        if (!target || load < best) target = w, best = load;
      }
    }
    if (!target) return Unavailable("model '" + config_.name + "' has no live instance");
    const std::optional<uint64_t> id = target->decoder->TrySubmit(request);
    if (!id) {
      refused.push_back(std::move(target));
      continue;
    }
    // A generative model's arrivals are decode steps asked for (max_tokens, an upper bound),
    // the unit of its plans' capacity: b sequences a step.
    rows_arrived_.fetch_add(std::max<int64_t>(1, request->params.max_tokens),
                            std::memory_order_relaxed);
    // The worker (and its decoder) stays alive as long as a canceller can reach it.
    *cancel = [target, id = *id] { target->decoder->Cancel(id); };
    return Status::Ok();
  }
}

}  // namespace packrat
