#include "agent/batching/dispatcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "tests/agent/batching/fake_executor.h"

namespace packrat {
namespace {

using batching_test::Completion;
using batching_test::FakeExecutor;
using batching_test::MakeRequest;
using Mode = FakeExecutor::Mode;

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

class PartitionRowsTest : public ::testing::Test {};

TEST_F(PartitionRowsTest, NoInstancesOrNoRows) {
  EXPECT_TRUE(PartitionRows(5, {}, {}, 0).empty());
  EXPECT_EQ(PartitionRows(0, {4, 2}, {0, 0}, 0), (std::vector<int64_t>{0, 0}));
}

TEST_F(PartitionRowsTest, FullRoundsFollowBatchSizes) {
  EXPECT_EQ(PartitionRows(7, {4, 2, 1}, {0, 0, 0}, 0), (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(PartitionRows(21, {4, 2, 1}, {5, 0, 9}, 2), (std::vector<int64_t>{12, 6, 3}));
}

TEST_F(PartitionRowsTest, RemainderIsSharedInProportionToBatchSizes) {
  // B = 7, 10 rows: one full round (4, 2, 1) and r = 3. Exact shares 12/7, 6/7, 3/7: the
  // floors give (1, 0, 0); the two leftover rows go to the largest fractions, 6/7 then 5/7.
  EXPECT_EQ(PartitionRows(10, {4, 2, 1}, {0, 0, 0}, 0), (std::vector<int64_t>{6, 3, 1}));
  // B = 12, r = 6: exactly half of every instance.
  EXPECT_EQ(PartitionRows(6, {8, 4}, {0, 0}, 0), (std::vector<int64_t>{4, 2}));
  // With different sizes a single row goes to the largest instance (largest fraction), even
  // when it is the busier one.
  EXPECT_EQ(PartitionRows(1, {4, 2, 1}, {9, 0, 0}, 0), (std::vector<int64_t>{1, 0, 0}));
}

TEST_F(PartitionRowsTest, TiesGoToTheLeastLoadedInstance) {
  EXPECT_EQ(PartitionRows(1, {2, 2}, {3, 1}, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(PartitionRows(1, {2, 2}, {1, 3}, 0), (std::vector<int64_t>{1, 0}));
  // Single row with equal batch sizes: the least loaded, whatever the rotation.
  for (size_t rotation = 0; rotation < 6; ++rotation) {
    EXPECT_EQ(PartitionRows(1, {2, 2, 2}, {2, 0, 1}, rotation), (std::vector<int64_t>{0, 1, 0}))
        << "rotation " << rotation;
  }
  // Two rows over three equal instances: the two least loaded.
  EXPECT_EQ(PartitionRows(2, {2, 2, 2}, {5, 1, 0}, 0), (std::vector<int64_t>{0, 1, 1}));
}

TEST_F(PartitionRowsTest, EqualLoadsRotate) {
  for (size_t rotation = 0; rotation < 7; ++rotation) {
    std::vector<int64_t> want(3, 0);
    want[rotation % 3] = 1;
    EXPECT_EQ(PartitionRows(1, {1, 1, 1}, {0, 0, 0}, rotation), want) << "rotation " << rotation;
  }
  // Two rows starting after the rotation point, wrapping around.
  EXPECT_EQ(PartitionRows(2, {1, 1, 1}, {0, 0, 0}, 2), (std::vector<int64_t>{1, 0, 1}));
}

TEST_F(PartitionRowsTest, MissingLoadsCountAsIdle) {
  EXPECT_EQ(PartitionRows(1, {2, 2}, {4}, 0), (std::vector<int64_t>{0, 1}));
}

TEST_F(PartitionRowsTest, RandomPartitionsAreCompleteAndProportional) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5000; ++trial) {
    const size_t n = 1 + rng() % 5;
    std::vector<int64_t> sizes(n);
    std::vector<size_t> loads(n);
    for (size_t i = 0; i < n; ++i) {
      sizes[i] = 1 + rng() % 16;
      loads[i] = rng() % 4;
    }
    const int64_t target = Sum(sizes);
    const int64_t rows = 1 + rng() % (3 * target);
    const std::vector<int64_t> counts = PartitionRows(rows, sizes, loads, rng() % 8);
    ASSERT_EQ(counts.size(), n);
    ASSERT_EQ(Sum(counts), rows);
    const int64_t rounds = rows / target;
    const int64_t rest = rows % target;
    for (size_t i = 0; i < n; ++i) {
      // Each instance gets its full rounds, plus floor or ceil of its share of the rest.
      const int64_t extra = counts[i] - rounds * sizes[i];
      const int64_t floor_share = rest * sizes[i] / target;
      EXPECT_GE(extra, floor_share);
      EXPECT_LE(extra, floor_share + 1);
    }
  }
}

// Dispatcher over fake instances of batch sizes 4, 2 and 1 (B = 7).
class DispatcherTest : public ::testing::Test {
 protected:
  struct Submitted {
    int64_t id;
    int64_t rows;
    std::unique_ptr<Completion> completion;
  };

  void MakeExecutors(Mode mode, std::vector<int64_t> sizes = {4, 2, 1},
                     std::vector<bool> failing = {}) {
    failing.resize(sizes.size(), false);
    for (size_t i = 0; i < sizes.size(); ++i) {
      executors_.push_back(std::make_unique<FakeExecutor>(sizes[i], mode, failing[i]));
    }
  }

  std::unique_ptr<Dispatcher> MakeDispatcher(int max_inflight,
                                             std::vector<int64_t> batch_sizes = {}) {
    std::vector<InstanceExecutor*> raw;
    for (auto& e : executors_) raw.push_back(e.get());
    auto dispatcher = std::make_unique<Dispatcher>(
        raw, max_inflight,
        [this] {
          std::lock_guard<std::mutex> lock(mu_);
          ++room_calls_;
          cv_.notify_all();
        },
        std::move(batch_sizes));
    DispatchObserver observer;
    observer.finished = [this](int64_t, std::chrono::duration<double>) {
      std::lock_guard<std::mutex> lock(mu_);
      ++batches_done_;
      cv_.notify_all();
    };
    dispatcher->set_observer(std::move(observer));
    return dispatcher;
  }

  // Batch 1: one request (id 0) of `rows` rows, reported to `completion`.
  static Batch OneRequest(int64_t rows, Completion* completion) {
    Batch batch;
    batch.id = 1;
    batch.requests = {MakeRequest(0, rows, completion)};
    batch.rows = rows;
    return batch;
  }

  // A batch of `count` fresh requests with seeded random row counts in [1, max_rows].
  Batch RandomBatch(std::mt19937& rng, int count, int64_t max_rows) {
    Batch batch;
    batch.id = next_batch_id_++;
    for (int i = 0; i < count; ++i) {
      const int64_t rows = 1 + static_cast<int64_t>(rng() % max_rows);
      auto& s =
          submitted_.emplace_back(Submitted{next_id_++, rows, std::make_unique<Completion>()});
      batch.requests.push_back(MakeRequest(s.id, rows, s.completion.get()));
      batch.rows += rows;
    }
    return batch;
  }

  int batches_done() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_done_;
  }

  // Every request: callback exactly once, OK, exactly its rows, in order.
  void ExpectAllCorrect() {
    for (const Submitted& s : submitted_) {
      EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows)) << "request " << s.id;
    }
  }

  // Every row of every request was handed to exactly one executor, once; no slice broke its
  // executor's batch size or miscounted its rows.
  void ExpectEveryRowSentOnce() {
    std::map<std::string, std::vector<int>> hits;
    for (const auto& e : executors_) {
      EXPECT_EQ(e->oversized_slices(), 0u) << "b=" << e->batch_size();
      EXPECT_LE(e->max_slice_rows(), e->batch_size());
      EXPECT_EQ(e->malformed_slices(), 0u);
      for (const auto& [id, rows] : e->row_hits()) {
        auto& h = hits[id];
        h.resize(rows.size());
        for (size_t r = 0; r < rows.size(); ++r) h[r] += rows[r];
      }
    }
    for (const Submitted& s : submitted_) {
      const auto& h = hits[std::to_string(s.id)];
      ASSERT_EQ(h.size(), static_cast<size_t>(s.rows)) << "request " << s.id;
      for (int64_t r = 0; r < s.rows; ++r) EXPECT_EQ(h[r], 1) << "request " << s.id << " row " << r;
    }
  }

  std::vector<std::unique_ptr<FakeExecutor>> executors_;
  std::vector<Submitted> submitted_;
  std::mutex mu_;
  std::condition_variable cv_;
  int batches_done_ = 0;  // the observer's finished hook
  int room_calls_ = 0;    // the on_room hook
  uint64_t next_batch_id_ = 1;
  int64_t next_id_ = 0;
};

TEST_F(DispatcherTest, NoExecutorsMeansNoCapacity) {
  auto dispatcher = MakeDispatcher(2);
  EXPECT_FALSE(dispatcher->HasCapacity());
}

TEST_F(DispatcherTest, ReassemblesRowsAcrossInstancesOfDifferentBatchSizes) {
  MakeExecutors(Mode::kInline);
  auto dispatcher = MakeDispatcher(2);
  std::mt19937 rng(2024);
  constexpr int kBatches = 300;
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_TRUE(dispatcher->HasCapacity());
    // Batches below, at and far above B = 7, from requests of 1..9 rows.
    dispatcher->Dispatch(RandomBatch(rng, 1 + static_cast<int>(rng() % 5), 9));
    // Inline executors: the batch finished inside Dispatch.
    EXPECT_EQ(dispatcher->inflight_batches(), 0);
    EXPECT_EQ(batches_done(), b + 1);
  }
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
  for (const auto& e : executors_) EXPECT_GT(e->slices(), 0u) << "b=" << e->batch_size();
}

TEST_F(DispatcherTest, SplitsAFullBatchByBatchSize) {
  MakeExecutors(Mode::kDeferred);
  auto dispatcher = MakeDispatcher(2);
  Batch batch;
  batch.id = 9;
  Completion a, b;
  batch.requests = {MakeRequest(0, 3, &a), MakeRequest(1, 11, &b)};
  batch.rows = 14;  // two full rounds of B = 7
  dispatcher->Dispatch(std::move(batch));
  EXPECT_EQ(executors_[0]->rows(), 8);
  EXPECT_EQ(executors_[1]->rows(), 4);
  EXPECT_EQ(executors_[2]->rows(), 2);
  EXPECT_EQ(executors_[0]->slices(), 2u);
  EXPECT_EQ(executors_[1]->slices(), 2u);
  EXPECT_EQ(executors_[2]->slices(), 2u);
  for (auto& e : executors_) e->RunAll();
  EXPECT_TRUE(a.HasCorrectOutputs(0, 3));
  EXPECT_TRUE(b.HasCorrectOutputs(1, 11));
  EXPECT_EQ(batches_done(), 1);
}

// A plan that keeps instances at a smaller b than they can run: rows are shared by the plan's b
// (a b above what an executor can run is taken as its limit), and each executor's share runs in
// slices as large as it can run.
TEST_F(DispatcherTest, SharesByThePlansBatchSizesAndCutsByTheExecutorsLimits) {
  MakeExecutors(Mode::kDeferred, {8, 8, 2});
  auto dispatcher = MakeDispatcher(2, {2, 1, 4});  // shares by b = 2, 1, 2
  Batch batch;
  batch.id = 3;
  Completion a;
  batch.requests = {MakeRequest(0, 10, &a)};
  batch.rows = 10;  // two full rounds of B = 5
  dispatcher->Dispatch(std::move(batch));
  EXPECT_EQ(executors_[0]->rows(), 4);
  EXPECT_EQ(executors_[1]->rows(), 2);
  EXPECT_EQ(executors_[2]->rows(), 4);
  EXPECT_EQ(executors_[0]->slices(), 1u);
  EXPECT_EQ(executors_[1]->slices(), 1u);
  EXPECT_EQ(executors_[2]->slices(), 2u);
  for (auto& e : executors_) e->RunAll();
  EXPECT_TRUE(a.HasCorrectOutputs(0, 10));
  EXPECT_EQ(batches_done(), 1);
}

// Rows whose size varies fit fewer to a slab than the instance's b: each share runs in slices
// whose inputs fit (RowsThatFit), several per instance where needed, and every row is right.
TEST_F(DispatcherTest, CutsSlicesSoThatTheirInputsFitTheSlab) {
  MakeExecutors(Mode::kDeferred, {8, 8});
  constexpr int64_t kWidth = 100;                      // 800-byte rows
  const uint64_t capacity = 4 * kWidth * 8 + 63 + 10;  // four rows, with alignment to spare
  for (auto& e : executors_) e->set_input_capacity(capacity);
  auto dispatcher = MakeDispatcher(2);
  Batch batch;
  batch.id = 4;
  Completion a, b;
  batch.requests = {MakeRequest(0, 12, &a, SteadyTime{}, kWidth),
                    MakeRequest(1, 4, &b, SteadyTime{}, kWidth)};
  batch.rows = 16;  // one full round of B = 16
  dispatcher->Dispatch(std::move(batch));
  for (auto& e : executors_) {
    EXPECT_EQ(e->rows(), 8);
    EXPECT_EQ(e->slices(), 2u);
    EXPECT_EQ(e->max_slice_rows(), 4);
    e->RunAll();
  }
  EXPECT_TRUE(a.HasCorrectOutputs(0, 12));
  EXPECT_TRUE(b.HasCorrectOutputs(1, 4));
  EXPECT_EQ(batches_done(), 1);

  // Narrow rows fit the instances' b as before.
  Completion c;
  Batch narrow;
  narrow.id = 5;
  narrow.requests = {MakeRequest(2, 16, &c)};
  narrow.rows = 16;
  dispatcher->Dispatch(std::move(narrow));
  for (auto& e : executors_) {
    EXPECT_EQ(e->slices(), 3u);
    EXPECT_EQ(e->max_slice_rows(), 8);
    e->RunAll();
  }
  EXPECT_TRUE(c.HasCorrectOutputs(2, 16));
}

// Room is counted per instance: each slice that finishes gives its instance's b back at once,
// whether or not the rest of its batch has finished, and a batch counts as in flight until its
// last slice.
TEST_F(DispatcherTest, RoomComesBackSliceBySlice) {
  MakeExecutors(Mode::kDeferred);  // b = 4, 2, 1
  auto dispatcher = MakeDispatcher(2);
  std::mt19937 rng(5);
  EXPECT_EQ(dispatcher->Room(), 14);     // two slices of b each
  Batch first = RandomBatch(rng, 7, 1);  // 7 rows: one slice per instance
  const uint64_t first_id = first.id;
  dispatcher->Dispatch(std::move(first));
  EXPECT_EQ(dispatcher->Room(), 7);
  Batch second = RandomBatch(rng, 7, 1);
  const uint64_t second_id = second.id;
  dispatcher->Dispatch(std::move(second));
  EXPECT_EQ(dispatcher->inflight_batches(), 2);
  EXPECT_EQ(dispatcher->Room(), 0);
  EXPECT_FALSE(dispatcher->HasCapacity());

  // The b = 4 instance finishes its slice of the first batch: its room is back, and the
  // on_room hook ran, while the batch still waits for the other two.
  ASSERT_TRUE(executors_[0]->RunOne(first_id));
  EXPECT_EQ(dispatcher->Room(), 4);
  EXPECT_EQ(room_calls_, 1);
  EXPECT_EQ(batches_done(), 0);
  EXPECT_EQ(dispatcher->inflight_batches(), 2);

  // A batch cut for that room goes to that instance alone.
  Batch third = RandomBatch(rng, 4, 1);
  const uint64_t third_id = third.id;
  dispatcher->Dispatch(std::move(third));
  EXPECT_EQ(executors_[0]->pending_of(third_id), 1u);
  EXPECT_EQ(executors_[1]->pending_of(third_id) + executors_[2]->pending_of(third_id), 0u);
  EXPECT_EQ(dispatcher->Room(), 0);
  EXPECT_EQ(dispatcher->inflight_batches(), 3);

  for (size_t i = 1; i < executors_.size(); ++i) ASSERT_TRUE(executors_[i]->RunOne(first_id));
  EXPECT_EQ(batches_done(), 1);
  EXPECT_EQ(dispatcher->inflight_batches(), 2);
  EXPECT_EQ(dispatcher->Room(), 3);

  for (auto& e : executors_) e->RunBatch(second_id);
  for (auto& e : executors_) e->RunBatch(third_id);
  EXPECT_EQ(batches_done(), 3);
  EXPECT_EQ(dispatcher->inflight_batches(), 0);
  EXPECT_EQ(dispatcher->Room(), 14);
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
}

// A slow slice holds only its own instance: the others take the next rows as they free up,
// instead of waiting for the slowest slice of their batch.
TEST_F(DispatcherTest, AStragglerHoldsOnlyItsOwnInstance) {
  MakeExecutors(Mode::kDeferred, {2, 2, 2});
  auto dispatcher = MakeDispatcher(1);
  std::mt19937 rng(6);
  dispatcher->Dispatch(RandomBatch(rng, 6, 1));
  EXPECT_FALSE(dispatcher->HasCapacity());
  // Instance 0 straggles; 1 and 2 finish and take two more batches' worth each, one by one.
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 1; i < executors_.size(); ++i) {
      ASSERT_EQ(executors_[i]->RunAll(), 1u);
      EXPECT_EQ(dispatcher->Room(), 2);
      const Batch next = RandomBatch(rng, 2, 1);
      const uint64_t id = next.id;
      dispatcher->Dispatch(next);
      EXPECT_EQ(executors_[i]->pending_of(id), 1u) << "round " << round << " instance " << i;
    }
  }
  EXPECT_EQ(executors_[0]->slices(), 1u);
  EXPECT_EQ(executors_[1]->slices(), 3u);
  EXPECT_EQ(executors_[2]->slices(), 3u);
  for (auto& e : executors_) e->RunAll();
  EXPECT_EQ(batches_done(), 5);
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
}

TEST_F(DispatcherTest, SlicesFinishingOutOfOrderStillReassemble) {
  MakeExecutors(Mode::kDeferred);
  auto dispatcher = MakeDispatcher(4);
  std::mt19937 rng(11);
  for (int b = 0; b < 4; ++b) dispatcher->Dispatch(RandomBatch(rng, 4, 9));
  EXPECT_FALSE(dispatcher->HasCapacity());
  // Newest batches first, the smallest instance first.
  for (uint64_t id = next_batch_id_ - 1; id >= 1; --id) {
    for (size_t i = executors_.size(); i-- > 0;) executors_[i]->RunBatch(id);
  }
  EXPECT_EQ(batches_done(), 4);
  EXPECT_EQ(dispatcher->inflight_batches(), 0);
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
}

TEST_F(DispatcherTest, ConcurrentCompletionsOnExecutorThreads) {
  // One worker thread per instance finishes slices while this thread keeps dispatching
  // whenever there is capacity, as the scheduler does.
  MakeExecutors(Mode::kWorker);
  auto dispatcher = MakeDispatcher(2);
  std::mt19937 rng(99);
  constexpr int kBatches = 400;
  for (int b = 0; b < kBatches; ++b) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ASSERT_TRUE(
          cv_.wait_for(lock, std::chrono::seconds(10), [&] { return dispatcher->HasCapacity(); }));
    }
    dispatcher->Dispatch(RandomBatch(rng, 1 + static_cast<int>(rng() % 6), 9));
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(
        cv_.wait_for(lock, std::chrono::seconds(10), [&] { return batches_done_ == kBatches; }));
  }
  for (auto& e : executors_) e->StopWorker();
  EXPECT_EQ(dispatcher->inflight_batches(), 0);
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
}

// A reconfiguration that keeps an instance destroys the old set's dispatcher once WaitIdle says
// it is idle, while the kept instance's thread lives on: idle must mean that the last batch's
// hooks have returned, not only that its capacity came back. Here the observer's hook is still
// running when this thread starts waiting.
TEST_F(DispatcherTest, WaitIdleReturnsOnlyOnceTheLastBatchsHooksHaveReturned) {
  MakeExecutors(Mode::kDeferred, {2});
  auto dispatcher = MakeDispatcher(1);
  std::mutex mu;
  std::condition_variable cv;
  bool waiting = false;   // guarded by mu
  bool returned = false;  // guarded by mu
  DispatchObserver observer;
  observer.finished = [&](int64_t, std::chrono::duration<double>) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return waiting; });
    returned = true;
  };
  dispatcher->set_observer(std::move(observer));
  Completion completion;
  dispatcher->Dispatch(OneRequest(2, &completion));
  std::thread executor_thread([&] { executors_[0]->RunAll(); });
  EXPECT_TRUE(completion.Wait());  // the rows are delivered; the hooks come after
  {
    std::lock_guard<std::mutex> lock(mu);
    waiting = true;
  }
  cv.notify_all();
  EXPECT_TRUE(dispatcher->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(returned) << "WaitIdle returned before the observer's hook did";
  }
  dispatcher.reset();  // under ASan: the executor thread must not touch it any more
  executor_thread.join();
  EXPECT_TRUE(completion.HasCorrectOutputs(0, 2));
}

// After a drain timeout the old set's dispatcher is dropped with slices still queued on an
// instance that a reconfiguration kept: they finish later, and answer their requests.
TEST_F(DispatcherTest, SlicesFinishAfterTheirDispatcherIsGone) {
  MakeExecutors(Mode::kDeferred, {2});
  auto dispatcher = MakeDispatcher(1);
  Completion completion;
  dispatcher->Dispatch(OneRequest(3, &completion));
  EXPECT_FALSE(dispatcher->WaitIdle(std::chrono::steady_clock::now()));
  dispatcher.reset();  // under ASan: the slices must not refer to it
  executors_[0]->RunAll();
  EXPECT_TRUE(completion.HasCorrectOutputs(0, 3));
  EXPECT_EQ(batches_done(), 1);
}

TEST_F(DispatcherTest, RotatesSingleRowsOverIdleInstances) {
  MakeExecutors(Mode::kInline, {1, 1, 1});
  auto dispatcher = MakeDispatcher(1);
  std::mt19937 rng(3);
  for (int b = 0; b < 30; ++b) dispatcher->Dispatch(RandomBatch(rng, 1, 1));
  for (const auto& e : executors_) EXPECT_EQ(e->slices(), 10u);
  ExpectAllCorrect();
}

// Between instances with the same room, the one with fewer slices of any dispatcher (an
// instance kept across a reconfiguration still runs the old set's) gets the row.
TEST_F(DispatcherTest, PrefersTheLessLoadedInstance) {
  MakeExecutors(Mode::kDeferred, {2, 2});
  executors_[0]->set_extra_load(3);
  auto dispatcher = MakeDispatcher(8);
  std::mt19937 rng(4);
  dispatcher->Dispatch(RandomBatch(rng, 1, 1));
  EXPECT_EQ(executors_[0]->slices(), 0u);
  EXPECT_EQ(executors_[1]->slices(), 1u);
  for (auto& e : executors_) e->RunAll();
  ExpectAllCorrect();
}

TEST_F(DispatcherTest, ADeadInstanceGetsNoRowsWhileALiveOneIsLeft) {
  // Its runtime died and its replacement is starting: each slice it got would fail.
  MakeExecutors(Mode::kInline, {4, 4, 2});
  executors_[1]->set_alive(false);
  auto dispatcher = MakeDispatcher(2);
  std::mt19937 rng(5);
  for (int b = 0; b < 50; ++b) dispatcher->Dispatch(RandomBatch(rng, 1 + b % 4, 5));
  EXPECT_EQ(executors_[1]->slices(), 0u);
  EXPECT_GT(executors_[0]->rows(), executors_[2]->rows());  // still shared by b: 4 to 2
  ExpectAllCorrect();
  ExpectEveryRowSentOnce();
  // Whole batches (layered) skip it too, though its load of 0 is the lowest.
  dispatcher->set_whole_batches(true);
  for (int b = 0; b < 10; ++b) dispatcher->Dispatch(RandomBatch(rng, 1, 3));
  EXPECT_EQ(executors_[1]->slices(), 0u);
  ExpectAllCorrect();
  // With every instance dead the rows still go out, to fail or be retried there.
  executors_[0]->set_alive(false);
  executors_[2]->set_alive(false);
  dispatcher->set_whole_batches(false);
  dispatcher->Dispatch(RandomBatch(rng, 2, 5));
  EXPECT_GT(executors_[0]->slices() + executors_[1]->slices() + executors_[2]->slices(), 0u);
  ExpectEveryRowSentOnce();
}

TEST_F(DispatcherTest, FailingInstanceFailsOnlyTheRequestsItCarried) {
  MakeExecutors(Mode::kInline, {4, 2, 1}, {false, true, false});
  auto dispatcher = MakeDispatcher(2);
  std::mt19937 rng(77);
  for (int b = 0; b < 200; ++b)
    dispatcher->Dispatch(RandomBatch(rng, 1 + static_cast<int>(rng() % 5), 9));
  EXPECT_EQ(batches_done(), 200);
  EXPECT_EQ(dispatcher->inflight_batches(), 0);
  ExpectEveryRowSentOnce();

  const std::set<std::string> failed = executors_[1]->carried();
  ASSERT_FALSE(failed.empty());
  size_t ok = 0;
  for (const Submitted& s : submitted_) {
    if (failed.count(std::to_string(s.id)) != 0) {
      EXPECT_EQ(s.completion->calls(), 1) << "request " << s.id;
      EXPECT_EQ(s.completion->status().code(), StatusCode::kInternal) << "request " << s.id;
      EXPECT_EQ(s.completion->status().message(), "instance crashed");
    } else {
      EXPECT_TRUE(s.completion->HasCorrectOutputs(s.id, s.rows)) << "request " << s.id;
      ++ok;
    }
  }
  EXPECT_GT(ok, 0u) << "every request touched the failing instance; the test proves little";
}

TEST_F(DispatcherTest, FailingInstanceOnDeferredSlicesFailsEachRequestOnce) {
  // Rows of one request split over a good and a failing instance: whichever side finishes
  // first, the request completes once, with the error.
  MakeExecutors(Mode::kDeferred, {2, 2}, {false, true});
  auto dispatcher = MakeDispatcher(2);
  Completion c;
  Batch batch = OneRequest(4, &c);
  dispatcher->Dispatch(std::move(batch));
  executors_[0]->RunAll();
  EXPECT_EQ(c.calls(), 0);
  executors_[1]->RunAll();
  EXPECT_EQ(c.calls(), 1);
  EXPECT_EQ(c.status().code(), StatusCode::kInternal);
  EXPECT_EQ(batches_done(), 1);

  Completion d;
  batch = Batch();
  batch.id = 2;
  batch.requests = {MakeRequest(1, 4, &d)};
  batch.rows = 4;
  dispatcher->Dispatch(std::move(batch));
  executors_[1]->RunAll();  // the failure first this time
  EXPECT_EQ(d.calls(), 0);
  executors_[0]->RunAll();
  EXPECT_EQ(d.calls(), 1);
  EXPECT_EQ(d.status().code(), StatusCode::kInternal);
  EXPECT_EQ(batches_done(), 2);
  EXPECT_EQ(dispatcher->inflight_batches(), 0);
}

}  // namespace
}  // namespace packrat
