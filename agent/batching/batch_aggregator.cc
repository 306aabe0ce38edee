#include "agent/batching/batch_aggregator.h"

namespace packrat {

BatchAggregator::BatchAggregator(Options options) : options_(options) {
  if (options_.target_rows < 1) options_.target_rows = 1;
}

Status BatchAggregator::Enqueue(std::shared_ptr<InferenceRequest> request) {
  if (request->rows() > options_.max_queue_rows) {
    // Never servable, and a request of 2^62 zero-byte rows would be cut into as many slices.
    return InvalidArgument("a request of " + std::to_string(request->rows()) +
                           " rows is more than the model queues (batching.max_queue_rows = " +
                           std::to_string(options_.max_queue_rows) + ")");
  }
  if (queued_rows_ + request->rows() > options_.max_queue_rows) {
    return ResourceExhausted("the model's queue is full (" + std::to_string(queued_rows_) +
                             " rows waiting)");
  }
  queued_rows_ += request->rows();
  if (request->deadline()) ++with_deadline_;
  queue_.push_back(std::move(request));
  return Status::Ok();
}

std::optional<SteadyTime> BatchAggregator::NextDeadline() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.front()->arrival() + options_.max_delay;
}

std::optional<SteadyTime> BatchAggregator::NextExpiry() const {
  std::optional<SteadyTime> earliest;
  if (with_deadline_ == 0) return earliest;
  for (const auto& r : queue_) {
    if (r->deadline() && (!earliest || *r->deadline() < *earliest)) earliest = r->deadline();
  }
  return earliest;
}

std::vector<std::shared_ptr<InferenceRequest>> BatchAggregator::TakeExpired(SteadyTime now) {
  std::vector<std::shared_ptr<InferenceRequest>> expired;
  if (with_deadline_ == 0) return expired;
  std::deque<std::shared_ptr<InferenceRequest>> keep;
  for (auto& r : queue_) {
    if (r->deadline() && *r->deadline() <= now) {
      queued_rows_ -= r->rows();
      --with_deadline_;
      expired.push_back(std::move(r));
    } else {
      keep.push_back(std::move(r));
    }
  }
  queue_.swap(keep);
  return expired;
}

std::optional<Batch> BatchAggregator::Poll(SteadyTime now, int64_t room) {
  if (queue_.empty() || room <= 0) return std::nullopt;
  const int64_t target = options_.target_rows;
  if (queued_rows_ < std::min(target, room) && now < *NextDeadline()) return std::nullopt;
  Batch batch;
  batch.id = next_batch_id_++;
  const InferenceRequest& first = *queue_.front();
  int64_t limit = std::max(target, options_.max_rows);
  // Room for fewer than B rows: the same share of a backlog batch's max_rows (at least 1 row).
  if (room < target) limit = std::max<int64_t>(1, limit * room / target);
  while (!queue_.empty()) {
    const auto& next = queue_.front();
    if (!batch.requests.empty() &&
        (batch.rows + next->rows() > limit || !next->CompatibleWith(first))) {
      break;
    }
    batch.rows += next->rows();
    queued_rows_ -= next->rows();
    if (next->deadline()) --with_deadline_;
    batch.requests.push_back(next);
    queue_.pop_front();
  }
  return batch;
}

std::vector<std::shared_ptr<InferenceRequest>> BatchAggregator::TakeFront(
    const std::function<bool(const InferenceRequest& request, int64_t rows)>& admit) {
  std::vector<std::shared_ptr<InferenceRequest>> taken;
  int64_t rows = 0;
  while (!queue_.empty() && admit(*queue_.front(), rows + queue_.front()->rows())) {
    auto& next = queue_.front();
    rows += next->rows();
    queued_rows_ -= next->rows();
    if (next->deadline()) --with_deadline_;
    taken.push_back(std::move(next));
    queue_.pop_front();
  }
  return taken;
}

std::vector<std::shared_ptr<InferenceRequest>> BatchAggregator::TakeAll() {
  std::vector<std::shared_ptr<InferenceRequest>> all(queue_.begin(), queue_.end());
  queue_.clear();
  queued_rows_ = 0;
  with_deadline_ = 0;
  return all;
}

}  // namespace packrat
