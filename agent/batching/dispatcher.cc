#include "agent/batching/dispatcher.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "agent/batching/slice_io.h"

namespace packrat {

Dispatcher::Dispatcher(std::vector<InstanceExecutor*> executors, int max_inflight,
                       std::function<void()> on_room, std::vector<int64_t> batch_sizes)
    : executors_(std::move(executors)),
      batch_sizes_(std::move(batch_sizes)),
      max_inflight_(std::max(1, max_inflight)),
      state_(std::make_shared<CompletionState>(executors_.size())) {
  state_->on_room = std::move(on_room);
  if (batch_sizes_.size() != executors_.size()) {
    batch_sizes_.clear();
    for (const InstanceExecutor* e : executors_) batch_sizes_.push_back(e->batch_size());
  }
  for (size_t i = 0; i < executors_.size(); ++i) {
    slice_limits_.push_back(executors_[i]->batch_size());
    batch_sizes_[i] = std::clamp<int64_t>(batch_sizes_[i], 1, slice_limits_[i]);
  }
}

int64_t Dispatcher::RoomOf(size_t i) const {
  const int held = state_->held[i].load(std::memory_order_acquire);
  return std::max(0, max_inflight_ - held) * batch_sizes_[i];
}

int64_t Dispatcher::Room() const {
  if (executors_.empty()) return 0;
  if (whole_batches_) {
    return state_->inflight.load(std::memory_order_acquire) < max_inflight_
               ? std::numeric_limits<int64_t>::max()
               : 0;
  }
  int64_t live = 0;
  int64_t all = 0;
  bool any_alive = false;
  for (size_t i = 0; i < executors_.size(); ++i) {
    const int64_t rows = RoomOf(i);
    all += rows;
    if (executors_[i]->alive()) {
      any_alive = true;
      live += rows;
    }
  }
  return any_alive ? live : all;
}

bool Dispatcher::WaitIdle(SteadyTime deadline) {
  CompletionState& state = *state_;
  MutexLock lock(&state.idle_mu);
  while (state.unfinished > 0) {
    if (!state.idle_cv.WaitUntil(&state.idle_mu, deadline)) return state.unfinished == 0;
  }
  return true;
}

void Dispatcher::Dispatch(Batch batch) {
  const size_t n = executors_.size();
  std::vector<size_t> loads;
  loads.reserve(n);
  for (const InstanceExecutor* e : executors_) loads.push_back(e->load());
  // A dead instance (its replacement starting) gets no rows while a live one is left: each of
  // its slices would fail. With none left, the slices fail as they would anyway.
  std::vector<bool> eligible(n);
  bool any_alive = false;
  for (size_t i = 0; i < n; ++i) {
    eligible[i] = executors_[i]->alive();
    any_alive = any_alive || eligible[i];
  }
  if (!any_alive) eligible.assign(n, true);
  const size_t rotation = rotation_.fetch_add(1);
  std::vector<int64_t> counts(n, 0);
  if (whole_batches_) {
    std::optional<size_t> pick;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (rotation + k) % n;
      if (eligible[i] && (!pick || loads[i] < loads[*pick])) pick = i;
    }
    counts[pick.value_or(rotation % n)] = batch.rows;
  } else {
    // Shares in proportion to each instance's room; where none has room (a caller that did not
    // ask Room()), in proportion to b, as a full round.
    std::vector<int64_t> shares(n, 0);
    int64_t room = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!eligible[i]) continue;
      shares[i] = RoomOf(i);
      room += shares[i];
    }
    if (room == 0) {
      for (size_t i = 0; i < n; ++i) shares[i] = eligible[i] ? batch_sizes_[i] : 0;
    }
    counts = PartitionRows(batch.rows, shares, loads, rotation);
  }

  // Cut the batch's rows, request by request, into slices of at most what each instance can
  // run at once (its b, unless its slabs hold more: a batch larger than B then runs in one
  // larger slice per instance instead of several of b), and whose inputs fit its slab: rows
  // of varying size may fit fewer (the batch's requests have the same non-batch dims). A row
  // that fits no slab still goes, alone, and fails with kOutOfRange; the model refuses such
  // requests before they queue (ServedModel::Submit).
  std::vector<int64_t> limits = slice_limits_;
  if (!batch.requests.empty()) {
    for (size_t i = 0; i < executors_.size(); ++i) {
      if (const uint64_t bytes = executors_[i]->input_capacity(); bytes > 0) {
        limits[i] = std::clamp<int64_t>(RowsThatFit(*batch.requests.front(), bytes), 1, limits[i]);
      }
    }
  }
  struct Cut {
    size_t executor;
    int64_t rows;
  };
  std::vector<Cut> cuts;
  std::vector<int64_t> left = counts;
  bool more = true;
  while (more) {  // round-robin so that every instance starts early
    more = false;
    for (size_t i = 0; i < executors_.size(); ++i) {
      if (left[i] == 0) continue;
      const int64_t n = std::min(left[i], limits[i]);
      cuts.push_back({i, n});
      left[i] -= n;
      more = more || left[i] > 0;
    }
  }

  // Counts slices still running; the last one to finish ends the batch.
  auto remaining = std::make_shared<std::atomic<size_t>>(cuts.size());
  state_->inflight.fetch_add(1, std::memory_order_acq_rel);
  for (const Cut& cut : cuts) state_->held[cut.executor].fetch_add(1, std::memory_order_acq_rel);
  {
    MutexLock lock(&state_->idle_mu);
    state_->unfinished += static_cast<int>(cuts.size());
  }
  const SteadyTime start = std::chrono::steady_clock::now();
  for (const auto& request : batch.requests) request->MarkDispatched(start);
  if (state_->observer.dispatched) state_->observer.dispatched(batch, start);
  // Captures no `this`: the dispatcher may be gone by the time a slice finishes.
  auto slice_done = [state = state_, remaining, start, rows = batch.rows, whole = whole_batches_,
                     limit = max_inflight_](size_t executor) {
    // Room first, so that the scheduler woken by on_room sees it.
    const int held = state->held[executor].fetch_sub(1, std::memory_order_acq_rel);
    bool roomier = !whole && held >= limit;  // the instance was full
    if (remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) {
      state->inflight.fetch_sub(1, std::memory_order_acq_rel);
      roomier = roomier || whole;
      if (state->observer.finished) {
        state->observer.finished(rows, std::chrono::steady_clock::now() - start);
      }
    }
    if (roomier && state->on_room) state->on_room();
    MutexLock lock(&state->idle_mu);
    if (--state->unfinished == 0) state->idle_cv.NotifyAll();
  };

  size_t req = 0;
  int64_t offset = 0;  // rows of batch.requests[req] already assigned
  for (const Cut& cut : cuts) {
    WorkSlice slice;
    slice.batch_id = batch.id;
    slice.rows = cut.rows;
    slice.on_done = [slice_done, executor = cut.executor] { slice_done(executor); };
    int64_t need = cut.rows;
    while (need > 0) {
      const auto& request = batch.requests[req];
      const int64_t take = std::min(need, request->rows() - offset);
      slice.ranges.push_back({request, offset, take});
      need -= take;
      offset += take;
      if (offset == request->rows()) {
        ++req;
        offset = 0;
      }
    }
    executors_[cut.executor]->Enqueue(std::move(slice));
  }
}

}  // namespace packrat
