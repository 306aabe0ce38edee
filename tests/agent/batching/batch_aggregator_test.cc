#include "agent/batching/batch_aggregator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "tests/agent/batching/fake_executor.h"

namespace packrat {
namespace {

using namespace std::chrono_literals;
using batching_test::Completion;
using batching_test::MakeRequest;

// The aggregator takes time as an argument: the tests move `now_` by hand.
class BatchAggregatorTest : public ::testing::Test {
 protected:
  static constexpr int64_t kTarget = 8;
  static constexpr std::chrono::microseconds kMaxDelay = 2ms;

  BatchAggregatorTest() : aggregator_(Options()) {}

  static BatchAggregator::Options Options(int64_t target = kTarget, int64_t max_queue = 64) {
    BatchAggregator::Options o;
    o.target_rows = target;
    o.max_delay = kMaxDelay;
    o.max_queue_rows = max_queue;
    return o;
  }

  // A request of `rows` rows arriving now; width is its non-batch dim.
  std::shared_ptr<InferenceRequest> Request(int64_t rows, int64_t width = 2) {
    completions_.push_back(std::make_unique<Completion>());
    return MakeRequest(next_id_++, rows, completions_.back().get(), now_, width);
  }

  Status Enqueue(int64_t rows, int64_t width = 2) {
    return aggregator_.Enqueue(Request(rows, width));
  }

  static std::vector<int64_t> Ids(const Batch& batch) {
    std::vector<int64_t> ids;
    for (const auto& r : batch.requests) ids.push_back(std::stoll(r->decoded().id));
    return ids;
  }

  SteadyTime now_ = SteadyTime{} + std::chrono::hours(1);
  BatchAggregator aggregator_;
  int64_t next_id_ = 0;
  std::vector<std::unique_ptr<Completion>> completions_;
};

TEST_F(BatchAggregatorTest, EmptyQueueHasNothingDue) {
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  EXPECT_FALSE(aggregator_.Poll(SteadyTime::max()).has_value());
  EXPECT_FALSE(aggregator_.NextDeadline().has_value());
  EXPECT_EQ(aggregator_.queued_rows(), 0);
  EXPECT_EQ(aggregator_.target_rows(), kTarget);
}

TEST_F(BatchAggregatorTest, FlushesOnFullBatch) {
  ASSERT_TRUE(Enqueue(3).ok());
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  ASSERT_TRUE(Enqueue(5).ok());
  EXPECT_EQ(aggregator_.queued_rows(), kTarget);
  // B rows are queued: the batch is due at once, long before the deadline.
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, kTarget);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(aggregator_.queued_rows(), 0);
  EXPECT_EQ(aggregator_.queued_requests(), 0u);
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
}

TEST_F(BatchAggregatorTest, FlushesOnDeadline) {
  ASSERT_TRUE(Enqueue(3).ok());
  now_ += 500us;
  ASSERT_TRUE(Enqueue(2).ok());
  const SteadyTime first_arrival = now_ - 500us;
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  EXPECT_FALSE(aggregator_.Poll(first_arrival + kMaxDelay - 1us).has_value());
  // The oldest request's max_delay is up: everything queued goes, short of B.
  std::optional<Batch> batch = aggregator_.Poll(first_arrival + kMaxDelay);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 5);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(aggregator_.queued_rows(), 0);
}

TEST_F(BatchAggregatorTest, NextDeadlineFollowsTheOldestRequest) {
  EXPECT_FALSE(aggregator_.NextDeadline().has_value());
  const SteadyTime t0 = now_;
  ASSERT_TRUE(Enqueue(1).ok());
  EXPECT_EQ(aggregator_.NextDeadline(), t0 + kMaxDelay);
  now_ += 1ms;
  ASSERT_TRUE(Enqueue(1, /*width=*/3).ok());  // not mixable with the first
  EXPECT_EQ(aggregator_.NextDeadline(), t0 + kMaxDelay);
  // Once the first request left, the deadline is the second one's.
  ASSERT_TRUE(aggregator_.Poll(t0 + kMaxDelay).has_value());
  EXPECT_EQ(aggregator_.NextDeadline(), t0 + 1ms + kMaxDelay);
  ASSERT_TRUE(aggregator_.Poll(t0 + 1ms + kMaxDelay).has_value());
  EXPECT_FALSE(aggregator_.NextDeadline().has_value());
}

// The autoscaler's rule 0 reads the wait of the oldest row not yet in a batch.
TEST_F(BatchAggregatorTest, OldestArrivalIsTheFrontRequests) {
  EXPECT_FALSE(aggregator_.OldestArrival().has_value());
  const SteadyTime t0 = now_;
  ASSERT_TRUE(Enqueue(1).ok());
  now_ += 1ms;
  ASSERT_TRUE(Enqueue(1, /*width=*/3).ok());
  EXPECT_EQ(aggregator_.OldestArrival(), t0);
  ASSERT_TRUE(aggregator_.Poll(t0 + kMaxDelay).has_value());
  EXPECT_EQ(aggregator_.OldestArrival(), t0 + 1ms);
  ASSERT_TRUE(aggregator_.Poll(t0 + 1ms + kMaxDelay).has_value());
  EXPECT_FALSE(aggregator_.OldestArrival().has_value());
}

TEST_F(BatchAggregatorTest, ZeroDelayFlushesImmediately) {
  BatchAggregator::Options o = Options();
  o.max_delay = 0us;
  BatchAggregator aggregator(o);
  ASSERT_TRUE(aggregator.Enqueue(Request(1)).ok());
  std::optional<Batch> batch = aggregator.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 1);
}

TEST_F(BatchAggregatorTest, BatchStopsBeforeExceedingTarget) {
  ASSERT_TRUE(Enqueue(5).ok());
  ASSERT_TRUE(Enqueue(5).ok());  // 10 queued >= B: due, but only the first fits
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 5);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0}));
  // The second waits for more rows or its deadline.
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  ASSERT_TRUE(Enqueue(3).ok());
  batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 8);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{1, 2}));
}

TEST_F(BatchAggregatorTest, OversizedFirstRequestGoesAlone) {
  ASSERT_TRUE(Enqueue(20).ok());
  ASSERT_TRUE(Enqueue(1).ok());
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 20);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0}));
  EXPECT_EQ(aggregator_.queued_rows(), 1);
}

TEST_F(BatchAggregatorTest, BatchesNeverExceedTargetExceptAnOversizedSingleRequest) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int64_t> rows(1, 12);
  std::uniform_int_distribution<int> arrivals(0, 3);
  BatchAggregator aggregator(Options(kTarget, 1 << 20));
  int64_t enqueued_rows = 0;
  int64_t batched_rows = 0;
  int64_t expected_id = 0;
  uint64_t last_batch_id = 0;
  for (int step = 0; step < 2000; ++step) {
    for (int i = arrivals(rng); i > 0; --i) {
      const int64_t r = rows(rng);
      ASSERT_TRUE(aggregator.Enqueue(Request(r)).ok());
      enqueued_rows += r;
    }
    now_ += 300us;
    while (std::optional<Batch> batch = aggregator.Poll(now_)) {
      ASSERT_FALSE(batch->requests.empty());
      EXPECT_GT(batch->id, last_batch_id);
      last_batch_id = batch->id;
      int64_t sum = 0;
      for (const auto& r : batch->requests) {
        sum += r->rows();
        // FIFO: requests leave in arrival order, none skipped or repeated.
        EXPECT_EQ(std::stoll(r->decoded().id), expected_id++);
      }
      EXPECT_EQ(sum, batch->rows);
      if (batch->requests.size() > 1) {
        EXPECT_LE(batch->rows, kTarget);
      }
      batched_rows += batch->rows;
    }
    // Nothing left waiting past its deadline.
    if (auto deadline = aggregator.NextDeadline()) {
      EXPECT_GT(*deadline, now_);
    }
  }
  EXPECT_EQ(batched_rows + aggregator.queued_rows(), enqueued_rows);
}

TEST_F(BatchAggregatorTest, DoesNotMixRequestsWithDifferentNonBatchDims) {
  ASSERT_TRUE(Enqueue(3, /*width=*/2).ok());
  ASSERT_TRUE(Enqueue(2, /*width=*/4).ok());
  ASSERT_TRUE(Enqueue(3, /*width=*/2).ok());
  ASSERT_EQ(aggregator_.queued_rows(), kTarget);
  // Due (B rows queued), but the batch stops at the first incompatible request: FIFO order
  // is kept, so request 2 does not jump ahead of request 1.
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0}));
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  batch = aggregator_.Poll(now_ + kMaxDelay);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{1}));
  batch = aggregator_.Poll(now_ + kMaxDelay);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{2}));
}

TEST_F(BatchAggregatorTest, CompatibleRequestsWithTheSameDimsShareABatch) {
  ASSERT_TRUE(Enqueue(2, /*width=*/4).ok());
  ASSERT_TRUE(Enqueue(2, /*width=*/4).ok());
  std::optional<Batch> batch = aggregator_.Poll(now_ + kMaxDelay);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0, 1}));
  for (const auto& r : batch->requests) EXPECT_TRUE(r->CompatibleWith(*batch->requests[0]));
}

TEST_F(BatchAggregatorTest, QueueFullIsResourceExhausted) {
  BatchAggregator aggregator(Options(kTarget, /*max_queue=*/10));
  ASSERT_TRUE(aggregator.Enqueue(Request(6)).ok());
  ASSERT_TRUE(aggregator.Enqueue(Request(4)).ok());  // exactly full
  const Status s = aggregator.Enqueue(Request(1));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(aggregator.queued_rows(), 10);
  EXPECT_EQ(aggregator.queued_requests(), 2u);
  // Room again once a batch left.
  ASSERT_TRUE(aggregator.Poll(now_).has_value());
  EXPECT_TRUE(aggregator.Enqueue(Request(1)).ok());
}

TEST_F(BatchAggregatorTest, ARequestLargerThanTheQueueIsInvalid) {
  // It could never be queued: a client error (400), not a full queue to retry (429).
  BatchAggregator aggregator(Options(kTarget, /*max_queue=*/10));
  const Status s = aggregator.Enqueue(Request(11));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("batching.max_queue_rows = 10"), std::string::npos) << s.message();
  EXPECT_EQ(aggregator.queued_rows(), 0);
  // One that fits alone is queued into an empty queue.
  EXPECT_TRUE(aggregator.Enqueue(Request(10)).ok());
}

TEST_F(BatchAggregatorTest, TakeAllEmptiesTheQueueInOrder) {
  ASSERT_TRUE(Enqueue(1).ok());
  ASSERT_TRUE(Enqueue(2, /*width=*/3).ok());
  ASSERT_TRUE(Enqueue(3).ok());
  std::vector<std::shared_ptr<InferenceRequest>> all = aggregator_.TakeAll();
  ASSERT_EQ(all.size(), 3u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]->decoded().id, std::to_string(i));
  EXPECT_EQ(aggregator_.queued_rows(), 0);
  EXPECT_EQ(aggregator_.queued_requests(), 0u);
  EXPECT_FALSE(aggregator_.NextDeadline().has_value());
  EXPECT_FALSE(aggregator_.Poll(SteadyTime::max()).has_value());
  EXPECT_TRUE(aggregator_.TakeAll().empty());
  // TakeAll hands requests over without finishing them.
  for (const auto& c : completions_) EXPECT_EQ(c->calls(), 0);
}

}  // namespace
}  // namespace packrat

namespace packrat {
namespace {

TEST_F(BatchAggregatorTest, ExpiredRequestsAreTakenOutAnywhereInTheQueue) {
  auto a = Request(1);
  auto b = Request(1);
  auto c = Request(1);
  b->set_deadline(now_ + 1ms);
  c->set_deadline(now_ + 5ms);
  ASSERT_TRUE(aggregator_.Enqueue(a).ok());
  ASSERT_TRUE(aggregator_.Enqueue(b).ok());
  ASSERT_TRUE(aggregator_.Enqueue(c).ok());
  EXPECT_EQ(aggregator_.NextExpiry(), now_ + 1ms);
  EXPECT_TRUE(aggregator_.TakeExpired(now_).empty());
  const auto expired = aggregator_.TakeExpired(now_ + 1ms);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], b);
  EXPECT_EQ(aggregator_.queued_rows(), 2);
  EXPECT_EQ(aggregator_.NextExpiry(), now_ + 5ms);
  // The rest still batch in order.
  std::optional<Batch> batch = aggregator_.Poll(now_ + kMaxDelay);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(aggregator_.NextExpiry().has_value()) << "c left in a batch";
}

TEST_F(BatchAggregatorTest, NoDeadlinesNoExpiry) {
  ASSERT_TRUE(Enqueue(2).ok());
  EXPECT_FALSE(aggregator_.NextExpiry().has_value());
  EXPECT_TRUE(aggregator_.TakeExpired(SteadyTime::max()).empty());
  EXPECT_EQ(aggregator_.queued_rows(), 2);
}

// With max_rows above B, a batch cut from a backlog takes up to max_rows rows; at B rows or fewer
// queued it is B as before.
TEST_F(BatchAggregatorTest, BacklogBatchesGrowToMaxRows) {
  BatchAggregator::Options o = Options(/*target=*/2);
  o.max_rows = 5;
  aggregator_ = BatchAggregator(o);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(Enqueue(1).ok());
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 5);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  batch = aggregator_.Poll(now_);  // 2 left: exactly B
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 2);
  ASSERT_TRUE(Enqueue(1).ok());  // 1 < B: waits for its deadline, as without max_rows
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  // A request that would take the batch beyond max_rows waits for the next one.
  ASSERT_TRUE(Enqueue(3).ok());
  ASSERT_TRUE(Enqueue(4).ok());
  batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 4);
  EXPECT_EQ(Ids(*batch), (std::vector<int64_t>{7, 8}));
}

TEST_F(BatchAggregatorTest, NewTargetAppliesToTheNextBatch) {
  ASSERT_TRUE(Enqueue(4).ok());
  EXPECT_FALSE(aggregator_.Poll(now_).has_value());
  aggregator_.set_target_rows(4);
  std::optional<Batch> batch = aggregator_.Poll(now_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows, 4);
}

}  // namespace
}  // namespace packrat
