#include "agent/batching/batch_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "tests/agent/batching/fake_executor.h"

namespace packrat {
namespace {

using namespace std::chrono_literals;
using batching_test::Completion;
using batching_test::FakeExecutor;
using batching_test::MakeRequest;
using Mode = FakeExecutor::Mode;

// A scheduler over a Dispatcher over fake instances. Waits are on the requests' callbacks
// (condition variables), never on time, except where a deadline is the behaviour under test.
class BatchSchedulerTest : public ::testing::Test {
 protected:
  static constexpr auto kLong = std::chrono::hours(1);  // a max_delay that never expires

  void Start(Mode mode, std::vector<int64_t> sizes, int max_inflight, int64_t target_rows,
             std::chrono::microseconds max_delay, int64_t max_queue_rows = 4096) {
    std::vector<InstanceExecutor*> raw;
    for (int64_t b : sizes) {
      executors_.push_back(std::make_unique<FakeExecutor>(b, mode));
      raw.push_back(executors_.back().get());
    }
    dispatcher_ = std::make_shared<Dispatcher>(raw, max_inflight, [this] {
      if (BatchScheduler* s = scheduler_ptr_.load()) s->Notify();
    });
    BatchAggregator::Options options;
    options.target_rows = target_rows;
    options.max_delay = max_delay;
    options.max_queue_rows = max_queue_rows;
    scheduler_ = std::make_unique<BatchScheduler>(options, dispatcher_);
    scheduler_ptr_.store(scheduler_.get());
  }

  void TearDown() override {
    // Order matters: no batch may finish into a destroyed dispatcher.
    if (scheduler_) scheduler_->Stop();
    for (auto& e : executors_) {
      e->StopWorker();
      e->RunAll();
    }
    scheduler_ptr_.store(nullptr);
    scheduler_.reset();
    dispatcher_.reset();
  }

  // Submits a fresh request of `rows` rows; returns Submit's status.
  Status Submit(int64_t rows) {
    auto& s = submitted_.emplace_back(next_id_++, rows);
    return scheduler_->Submit(
        MakeRequest(s.id, rows, s.completion.get(), std::chrono::steady_clock::now()));
  }

  struct Submitted {
    Submitted(int64_t id, int64_t rows)
        : id(id), rows(rows), completion(std::make_unique<Completion>()) {}
    int64_t id;
    int64_t rows;
    std::unique_ptr<Completion> completion;
  };

  std::vector<std::unique_ptr<FakeExecutor>> executors_;
  std::shared_ptr<Dispatcher> dispatcher_;
  std::atomic<BatchScheduler*> scheduler_ptr_{nullptr};
  std::unique_ptr<BatchScheduler> scheduler_;
  std::vector<Submitted> submitted_;
  int64_t next_id_ = 0;
};

TEST_F(BatchSchedulerTest, SubmittedRequestsComplete) {
  // Worker-thread instances of b = 4 and b = 2; B = 6; short max_delay so that partial
  // batches go too.
  Start(Mode::kWorker, {4, 2}, /*max_inflight=*/2, /*target_rows=*/6, 200us);
  std::mt19937 rng(8);
  submitted_.reserve(300);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(Submit(1 + static_cast<int64_t>(rng() % 8)).ok());
  for (const auto& s : submitted_) {
    ASSERT_TRUE(s.completion->Wait()) << "request " << s.id << " never completed";
    EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows)) << "request " << s.id;
  }
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  for (const auto& e : executors_) {
    EXPECT_LE(e->max_slice_rows(), e->batch_size());
    EXPECT_GT(e->slices(), 0u);
  }
}

TEST_F(BatchSchedulerTest, RequestsFromManyThreadsComplete) {
  Start(Mode::kWorker, {4, 2, 1}, /*max_inflight=*/3, /*target_rows=*/7, 100us);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100;
  std::vector<std::vector<std::unique_ptr<Completion>>> completions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        completions[t].push_back(std::make_unique<Completion>());
        const int64_t id = t * kPerThread + i;
        const Status s = scheduler_->Submit(MakeRequest(id, 1 + id % 5, completions[t].back().get(),
                                                        std::chrono::steady_clock::now()));
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const int64_t id = t * kPerThread + i;
      ASSERT_TRUE(completions[t][i]->Wait()) << "request " << id;
      EXPECT_TRUE(completions[t][i]->HasCorrectOutputs(id, 1 + id % 5));
    }
  }
}

TEST_F(BatchSchedulerTest, PartialBatchIsDispatchedAfterMaxDelay) {
  Start(Mode::kInline, {8}, 1, /*target_rows=*/8, 1ms);
  ASSERT_TRUE(Submit(3).ok());
  ASSERT_TRUE(submitted_[0].completion->Wait());
  EXPECT_TRUE(submitted_[0].completion->HasCorrectOutputs(0, 3));
  EXPECT_EQ(executors_[0]->slices(), 1u);
}

TEST_F(BatchSchedulerTest, StopFailsQueuedRequestsExactlyOnce) {
  Start(Mode::kInline, {128}, 1, /*target_rows=*/100, kLong);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Submit(1 + i).ok());
  EXPECT_EQ(scheduler_->queued_rows(), 15);
  scheduler_->Stop();
  for (const auto& s : submitted_) {
    EXPECT_EQ(s.completion->calls(), 1) << "request " << s.id;
    EXPECT_EQ(s.completion->status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  EXPECT_EQ(executors_[0]->slices(), 0u);

  // Refused afterwards; the refused request's callback is not run (the caller answers it).
  EXPECT_EQ(Submit(1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(submitted_.back().completion->calls(), 0);

  // Stop again, and the destructor's Stop, fail nothing twice.
  scheduler_->Stop();
  scheduler_ptr_.store(nullptr);
  scheduler_.reset();
  for (size_t i = 0; i + 1 < submitted_.size(); ++i) {
    EXPECT_EQ(submitted_[i].completion->calls(), 1);
  }
}

TEST_F(BatchSchedulerTest, StopLeavesDispatchedBatchesToTheirInstances) {
  // One batch in flight holds the only capacity; two requests wait behind it.
  Start(Mode::kDeferred, {2}, /*max_inflight=*/1, /*target_rows=*/2, kLong);
  ASSERT_TRUE(Submit(2).ok());
  ASSERT_TRUE(executors_[0]->WaitForPending(1));
  ASSERT_TRUE(Submit(1).ok());
  ASSERT_TRUE(Submit(1).ok());
  EXPECT_EQ(scheduler_->queued_rows(), 2);
  scheduler_->Stop();
  EXPECT_EQ(submitted_[1].completion->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(submitted_[2].completion->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(submitted_[0].completion->calls(), 0);
  // The dispatched batch still completes normally.
  EXPECT_EQ(executors_[0]->RunAll(), 1u);
  EXPECT_TRUE(submitted_[0].completion->HasCorrectOutputs(0, 2));
  EXPECT_EQ(submitted_[1].completion->calls(), 1);
  EXPECT_EQ(submitted_[2].completion->calls(), 1);
}

// An instance that frees up takes the rows waiting at once, as many as its b, although B
// rows never gather and the batching delay never expires: the slice that gave its room back
// wakes the scheduler thread (the dispatcher's on_room hook).
TEST_F(BatchSchedulerTest, AFreedInstanceTakesTheRowsWaiting) {
  Start(Mode::kDeferred, {2, 2}, /*max_inflight=*/1, /*target_rows=*/4, kLong);
  ASSERT_TRUE(Submit(4).ok());
  ASSERT_TRUE(executors_[0]->WaitForPending(1));
  ASSERT_TRUE(executors_[1]->WaitForPending(1));
  ASSERT_TRUE(Submit(1).ok());
  ASSERT_TRUE(Submit(1).ok());
  EXPECT_EQ(scheduler_->queued_rows(), 2);
  EXPECT_EQ(executors_[1]->RunAll(), 1u);
  ASSERT_TRUE(executors_[1]->WaitForPending(1));
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  EXPECT_EQ(executors_[0]->slices(), 1u);
  EXPECT_EQ(executors_[1]->slices(), 2u);
  for (auto& e : executors_) e->RunAll();
  for (const auto& s : submitted_) {
    ASSERT_TRUE(s.completion->Wait());
    EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows));
  }
}

TEST_F(BatchSchedulerTest, QueueFullIsResourceExhausted) {
  Start(Mode::kInline, {128}, 1, /*target_rows=*/100, kLong, /*max_queue_rows=*/4);
  ASSERT_TRUE(Submit(3).ok());
  EXPECT_EQ(Submit(2).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(submitted_[1].completion->calls(), 0);
  ASSERT_TRUE(Submit(1).ok());
  EXPECT_EQ(scheduler_->queued_rows(), 4);
}

TEST_F(BatchSchedulerTest, DrainDispatchesEverythingQueued) {
  // B = 16 and a max_delay that never expires: nothing would go without Drain.
  Start(Mode::kInline, {4, 2}, /*max_inflight=*/2, /*target_rows=*/16, kLong);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(Submit(1 + i % 2).ok());
  EXPECT_EQ(scheduler_->queued_rows(), 10);
  EXPECT_EQ(executors_[0]->slices() + executors_[1]->slices(), 0u);
  scheduler_->Drain(std::chrono::steady_clock::now() + 10s);
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  for (const auto& s : submitted_) {
    ASSERT_TRUE(s.completion->Wait());
    EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows));
  }
  // Draining refuses new work.
  EXPECT_EQ(Submit(1).code(), StatusCode::kUnavailable);
}

TEST_F(BatchSchedulerTest, DrainCutsBatchesOfAtMostTarget) {
  Start(Mode::kInline, {2}, /*max_inflight=*/1, /*target_rows=*/4, kLong);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit(1).ok());  // 3 < B: waits
  scheduler_->Drain(std::chrono::steady_clock::now() + 10s);
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  EXPECT_EQ(executors_[0]->rows(), 3);
  EXPECT_EQ(executors_[0]->slices(), 2u);  // b = 2: slices of 2 and 1
  for (const auto& s : submitted_) EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows));
}

TEST_F(BatchSchedulerTest, DrainWaitsForCapacityAndBatchDoneWakesTheScheduler) {
  Start(Mode::kDeferred, {2}, /*max_inflight=*/1, /*target_rows=*/2, kLong);
  ASSERT_TRUE(Submit(2).ok());  // a full batch: dispatched at once, holds all capacity
  ASSERT_TRUE(executors_[0]->WaitForPending(1));
  ASSERT_TRUE(Submit(1).ok());
  ASSERT_TRUE(Submit(1).ok());
  // No capacity: Drain gives up at its deadline with rows still queued.
  scheduler_->Drain(std::chrono::steady_clock::now() + 20ms);
  EXPECT_EQ(scheduler_->queued_rows(), 2);
  EXPECT_EQ(executors_[0]->slices(), 1u);
  // Finishing the batch frees capacity; the dispatcher's hook wakes the scheduler, which
  // dispatches the rest.
  EXPECT_EQ(executors_[0]->RunAll(), 1u);
  EXPECT_TRUE(submitted_[0].completion->HasCorrectOutputs(0, 2));
  ASSERT_TRUE(executors_[0]->WaitForPending(1));
  scheduler_->Drain(std::chrono::steady_clock::now() + 10s);
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  executors_[0]->RunAll();
  EXPECT_TRUE(submitted_[1].completion->HasCorrectOutputs(1, 1));
  EXPECT_TRUE(submitted_[2].completion->HasCorrectOutputs(2, 1));
}

}  // namespace
}  // namespace packrat

namespace packrat {
namespace {

TEST_F(BatchSchedulerTest, ExpiredQueuedRequestIsDeadlineExceededAndNeverRun) {
  Start(Mode::kDeferred, {2}, /*max_inflight=*/1, /*target_rows=*/2, kLong);
  ASSERT_TRUE(Submit(2).ok());  // takes the only capacity until the test runs it
  ASSERT_TRUE(executors_[0]->WaitForPending(1));
  auto& s = submitted_.emplace_back(next_id_++, 1);
  auto late = MakeRequest(s.id, 1, s.completion.get(), std::chrono::steady_clock::now());
  late->set_deadline(std::chrono::steady_clock::now() + 5ms);
  ASSERT_TRUE(scheduler_->Submit(late).ok());
  // The scheduler wakes at the deadline although no capacity frees up.
  ASSERT_TRUE(s.completion->Wait());
  EXPECT_EQ(s.completion->status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(scheduler_->queued_rows(), 0);
  EXPECT_EQ(executors_[0]->RunAll(), 1u);
  EXPECT_EQ(executors_[0]->rows(), 2) << "the expired request never reached an instance";
  EXPECT_TRUE(submitted_[0].completion->HasCorrectOutputs(0, 2));
}

TEST_F(BatchSchedulerTest, SwappedDispatcherGetsTheNextBatches) {
  Start(Mode::kInline, {2}, /*max_inflight=*/2, /*target_rows=*/2, kLong);
  ASSERT_TRUE(Submit(2).ok());
  FakeExecutor other(4, Mode::kInline);
  auto next = std::make_shared<Dispatcher>(std::vector<InstanceExecutor*>{&other}, 2, [] {});
  scheduler_->SwapDispatcher(next, 4, 0);
  ASSERT_TRUE(Submit(2).ok());  // 2 < the new B = 4: waits
  EXPECT_EQ(other.rows(), 0);
  ASSERT_TRUE(Submit(2).ok());
  for (const auto& s : submitted_) ASSERT_TRUE(s.completion->Wait());
  EXPECT_EQ(executors_[0]->rows(), 2);
  EXPECT_EQ(other.rows(), 4);
  EXPECT_EQ(other.slices(), 1u);
  for (const auto& s : submitted_) EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows));
  scheduler_->Stop();
}

}  // namespace
}  // namespace packrat
