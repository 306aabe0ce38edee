// Cuts batches into per-instance slices following the active plan and hands them to the
// instances' executors.
//
// Room: each instance holds at most `max_inflight` of this dispatcher's slices, running or
// queued. A batch is cut while some instance has room, sized to the room (Room()), and its rows
// go to the instances with room. So an instance that finishes early takes the next rows at once
// instead of waiting for the slowest slice of its batch: under service-time jitter a plan
// serves the capacity its slices' mean latencies give (docs/architecture.md, "Room per instance").
//
// Thread-safety: all methods may be called concurrently (the scheduler thread and I/O threads
// dispatch; slice completions arrive on executor threads). The limit is advisory: two callers
// that both saw room may exceed it by a slice each; executors queue the extra slices, so
// nothing is lost.
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
  // `executors` are not owned and must outlive the Dispatcher. `max_inflight`: the slices an
  // instance holds (whole batches: the batches running). `on_room` runs (on an executor
  // thread, after the room is counted) each time a slice finishes that had kept its instance
  // full, so that a scheduler waiting for room wakes; it must not block. `batch_sizes`:
  // each executor's b in the plan this dispatcher serves, at most its batch_size() (an instance
  // kept across a change of b runs the new b); empty: every executor's batch_size(). A batch is
  // shared in proportion to each instance's room at that b (PartitionRows) and cut into slices
  // of at most batch_size().
  Dispatcher(std::vector<InstanceExecutor*> executors, int max_inflight,
             std::function<void()> on_room, std::vector<int64_t> batch_sizes = {});

  // Installs metrics hooks; call before the first Dispatch().
  void set_observer(DispatchObserver observer) { state_->observer = std::move(observer); }
  // Layered batching: each batch goes whole to the least-loaded instance (in slices of at most
  // its batch size) instead of being shared by all. Call before the first Dispatch().
  void set_whole_batches(bool whole) { whole_batches_ = whole; }

  // The rows the instances have room for now, at the plan's b: Σ over live instances of
  // (max_inflight − slices held) × b, counting every instance where none is live (their
  // slices fail or are retried as they would anyway). Whole batches: unbounded while fewer
  // than max_inflight batches run, else 0.
  int64_t Room() const;
  bool HasCapacity() const { return Room() > 0; }
  // Splits `batch` into slices and enqueues them, its rows shared among the instances with
  // room in proportion to it (all of them where none has room). Never blocks.
  void Dispatch(Batch batch);

  // Blocks until no batch is running or `deadline`; true if idle. Idle means every batch's
  // completion hooks (observer, on_room) have returned too. Callers make sure nothing
  // dispatches meanwhile (BatchScheduler::SwapDispatcher), or the answer is stale at once.
  // The dispatcher may be destroyed whether or not it is idle: its slices hold what their
  // completion needs (a reconfiguration that kept an instance drops the old set's dispatcher
  // while the instance lives on, after a drain timeout even with its slices still queued).
  bool WaitIdle(SteadyTime deadline);

  int inflight_batches() const { return state_->inflight.load(std::memory_order_acquire); }
  const std::vector<InstanceExecutor*>& executors() const { return executors_; }

 private:
  // Rows executor i has room for at its b: (max_inflight − this dispatcher's slices it holds)
  // × b, at least 0.
  int64_t RoomOf(size_t i) const;

  std::vector<InstanceExecutor*> executors_;
  std::vector<int64_t> batch_sizes_;   // the plan's b, by executor: shares of a batch
  std::vector<int64_t> slice_limits_;  // the executors' batch_size(): the most rows of a slice
  const int max_inflight_;
  bool whole_batches_ = false;
  // What finishing a slice touches, shared with every slice in flight.
  struct CompletionState {
    explicit CompletionState(size_t instances) : held(instances) {}
    std::function<void()> on_room;
    DispatchObserver observer;
    std::vector<std::atomic<int>> held;  // by executor: this dispatcher's slices it holds
    std::atomic<int> inflight{0};        // batches not finished (whole batches: Room)
    Mutex idle_mu;
    CondVar idle_cv;
    int unfinished GUARDED_BY(idle_mu) = 0;  // slices whose completion hooks have not returned
  };
  const std::shared_ptr<CompletionState> state_;
  std::atomic<size_t> rotation_{0};
};

}  // namespace packrat
