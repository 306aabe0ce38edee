// Cuts batches into per-instance slices following the active plan and hands them to the
// instances' executors.
//
// Thread-safety: all methods may be called concurrently (the scheduler thread and I/O threads
// dispatch; batch completions arrive on executor threads). The in-flight limit is advisory:
// two callers that both saw capacity may exceed it by one batch each; executors queue the
// extra slices, so nothing is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "agent/batching/batch_aggregator.h"
#include "agent/batching/instance_executor.h"
#include "agent/planning/row_partition.h"
#include "common/mutex.h"

namespace packrat {

// Optional hooks for metrics, called on the dispatching thread (`dispatched`) and on the
// executor thread that finished a batch's last slice (`finished`). Must not block.
struct DispatchObserver {
  std::function<void(const Batch& batch, SteadyTime now)> dispatched;
  std::function<void(int64_t rows, std::chrono::duration<double> took)> finished;
};

class Dispatcher {
 public:
  // `executors` are not owned and must outlive the Dispatcher. `on_batch_done` runs (on an
  // executor thread) each time a batch has finished, i.e. capacity was freed. `batch_sizes`:
  // each executor's b in the plan this dispatcher serves, at most its batch_size() (an instance
  // kept across a change of b runs the new b); empty: every executor's batch_size(). A batch is
  // shared in proportion to b (PartitionRows) and cut into slices of at most batch_size().
  Dispatcher(std::vector<InstanceExecutor*> executors, int max_inflight_batches,
             std::function<void()> on_batch_done, std::vector<int64_t> batch_sizes = {});

  // Installs metrics hooks; call before the first Dispatch().
  void set_observer(DispatchObserver observer) { state_->observer = std::move(observer); }
  // Layered batching: each batch goes whole to the least-loaded instance (in slices of at most
  // its batch size) instead of being shared by all. Call before the first Dispatch().
  void set_whole_batches(bool whole) { whole_batches_ = whole; }

  // True while fewer than max_inflight_batches batches are running.
  bool HasCapacity() const;
  // Splits `batch` into slices and enqueues them. Never blocks.
  void Dispatch(Batch batch);

  // Blocks until no batch is running or `deadline`; true if idle. Idle means every batch's
  // completion hooks (observer, on_batch_done) have returned too. Callers make sure nothing
  // dispatches meanwhile (BatchScheduler::SwapDispatcher), or the answer is stale at once.
  // The dispatcher may be destroyed whether or not it is idle: its slices hold what their
  // completion needs (a reconfiguration that kept an instance drops the old set's dispatcher
  // while the instance lives on, after a drain timeout even with its slices still queued).
  bool WaitIdle(SteadyTime deadline);

  int inflight_batches() const { return state_->inflight.load(std::memory_order_acquire); }
  const std::vector<InstanceExecutor*>& executors() const { return executors_; }

 private:
  std::vector<InstanceExecutor*> executors_;
  std::vector<int64_t> batch_sizes_;   // the plan's b, by executor: shares of a batch
  std::vector<int64_t> slice_limits_;  // the executors' batch_size(): the most rows of a slice
  const int max_inflight_;
  bool whole_batches_ = false;
  // What finishing a batch touches, shared with every slice in flight.
  struct CompletionState {
    std::function<void()> on_batch_done;
    DispatchObserver observer;
    std::atomic<int> inflight{0};  // batches holding capacity (HasCapacity)
    Mutex idle_mu;
    CondVar idle_cv;
    int unfinished GUARDED_BY(idle_mu) = 0;  // batches whose hooks have not all returned
  };
  const std::shared_ptr<CompletionState> state_ = std::make_shared<CompletionState>();
  std::atomic<size_t> rotation_{0};
};

}  // namespace packrat
