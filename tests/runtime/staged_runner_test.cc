// Staged models (layered batching) in the runtime: stage-by-stage execution, rows joining a
// running batch, and the worker's top-up protocol over the segment's rings.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_runner.h"
#include "runtime/worker.h"
#include "shm/segment.h"

namespace packrat::runtime {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;
constexpr int64_t kRow = 3 * 64 * 64;  // staged_cnn: one 3x64x64 image -> 10 scores
constexpr int64_t kOut = 10;

std::unique_ptr<ModelRunner> Load(const std::string& file) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/" + file;
  auto r = ModelRunner::Create(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<float> Images(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(rows * kRow);
  for (float& f : v) f = normal(rng);
  return v;
}

RawTensor Tensor(std::vector<float>& v, int64_t rows) {
  return RawTensor{DataType::kFp32, {rows, 3, 64, 64}, v.data(), v.size() * sizeof(float)};
}

// Run() of the whole batch: the reference outputs.
std::vector<float> Reference(ModelRunner& runner, std::vector<float> images, int64_t rows) {
  std::vector<uint8_t> out(1 << 16);
  std::vector<RawTensor> outputs;
  EXPECT_TRUE(runner.Run({Tensor(images, rows)}, out.data(), out.size(), &outputs).ok());
  const float* y = static_cast<const float*>(outputs.at(0).data);
  return std::vector<float>(y, y + rows * kOut);
}

void ExpectClose(const float* got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(StagedRunnerTest, FindsTheStages) {
  auto staged = Load("staged_cnn.pt");
  auto plain = Load("small_cnn.pt");
  ASSERT_TRUE(staged && plain);
  EXPECT_EQ(staged->num_stages(), 4);
  EXPECT_EQ(plain->num_stages(), 0);
  std::vector<float> x = Images(1, 1);
  EXPECT_EQ(plain->Begin({Tensor(x, 1)}).code(), StatusCode::kFailedPrecondition);
}

TEST(StagedRunnerTest, BatchedRowsEqualRowsAlone) {
  auto runner = Load("staged_cnn.pt");
  ASSERT_TRUE(runner);
  const std::vector<float> images = Images(3, 2);
  const std::vector<float> batched = Reference(*runner, images, 3);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<float> one(images.begin() + r * kRow, images.begin() + (r + 1) * kRow);
    const std::vector<float> alone = Reference(*runner, one, 1);
    ExpectClose(batched.data() + r * kOut, alone);
  }
}

TEST(StagedRunnerTest, RowsJoiningAfterAnyStageGiveTheModelsOutputs) {
  auto runner = Load("staged_cnn.pt");
  ASSERT_TRUE(runner);
  std::vector<float> first = Images(2, 3), later = Images(3, 4);
  std::vector<float> all = first;
  all.insert(all.end(), later.begin(), later.end());
  const std::vector<float> want = Reference(*runner, all, 5);
  for (int join_after = 1; join_after < runner->num_stages(); ++join_after) {
    SCOPED_TRACE("join after stage " + std::to_string(join_after));
    ASSERT_TRUE(runner->Begin({Tensor(first, 2)}).ok());
    while (runner->stages_done() < join_after) ASSERT_TRUE(runner->RunStage().ok());
    ASSERT_TRUE(runner->Join({Tensor(later, 3)}).ok());
    EXPECT_EQ(runner->running_rows(), 5);
    while (runner->stages_done() < runner->num_stages()) ASSERT_TRUE(runner->RunStage().ok());
    std::vector<uint8_t> out(1 << 16);
    std::vector<RawTensor> outputs;
    ASSERT_TRUE(runner->Finish(out.data(), out.size(), &outputs).ok());
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{5, kOut}));
    ExpectClose(static_cast<const float*>(outputs[0].data), want);
  }
}

TEST(StagedRunnerTest, OutOfOrderCallsAreErrors) {
  auto runner = Load("staged_cnn.pt");
  ASSERT_TRUE(runner);
  std::vector<float> x = Images(1, 5);
  std::vector<uint8_t> out(1 << 16);
  std::vector<RawTensor> outputs;
  EXPECT_EQ(runner->RunStage().code(), StatusCode::kFailedPrecondition);  // no batch
  ASSERT_TRUE(runner->Begin({Tensor(x, 1)}).ok());
  EXPECT_EQ(runner->Join({Tensor(x, 1)}).code(), StatusCode::kFailedPrecondition);  // stage 0
  ASSERT_TRUE(runner->RunStage().ok());
  EXPECT_EQ(runner->Finish(out.data(), out.size(), &outputs).code(),
            StatusCode::kFailedPrecondition);  // stages left
  EXPECT_EQ(runner->Begin({Tensor(x, 1), Tensor(x, 1)}).code(), StatusCode::kInvalidArgument);
  // A wrongly shaped joining tensor fails the batch, not the runner.
  ASSERT_TRUE(runner->Begin({Tensor(x, 1)}).ok());
  ASSERT_TRUE(runner->RunStage().ok());
  RawTensor bad{DataType::kFp32, {1, 3, 8, 8}, x.data(), 3 * 8 * 8 * 4};
  EXPECT_FALSE(runner->Join({bad}).ok());
  EXPECT_EQ(Reference(*runner, x, 1).size(), static_cast<size_t>(kOut));  // still serves
}

// The worker's side of the protocol, with the test playing the agent.
class StagedWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = Load("staged_cnn.pt");
    ASSERT_TRUE(runner_);
    shm::SegmentOptions o;
    o.num_slots = 1;
    o.slot_input_bytes = 8 * kRow * 4 + 128;
    o.slot_output_bytes = 8 * kOut * 4;
    auto seg = shm::Segment::Create(shm::Segment::MakeName(getpid(), "staged_worker_test"), o);
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    segment_ = std::move(seg).value();
    worker_thread_ = std::thread([this] {
      Worker worker(segment_.get(), runner_.get(), WorkerOptions{});
      worker_status_ = worker.Run();
    });
  }
  void TearDown() override {
    if (segment_) segment_->requests().Close();
    if (worker_thread_.joinable()) worker_thread_.join();
  }

  // Writes `images` at `offset` of the slab and describes them.
  shm::BatchMessage Describe(const std::vector<float>& images, int64_t rows, uint64_t offset) {
    std::memcpy(segment_->input_slab(0) + offset, images.data(), images.size() * 4);
    shm::BatchMessage m;
    std::memset(&m, 0, sizeof(m));
    m.batch_id = 42;
    m.slot = 0;
    m.rows = rows;
    m.num_tensors = 1;
    shm::TensorDesc& d = m.tensors[0];
    d.datatype = static_cast<uint8_t>(DataType::kFp32);
    d.ndim = 4;
    const int64_t shape[] = {rows, 3, 64, 64};
    std::copy(shape, shape + 4, d.shape);
    d.offset = offset;
    d.byte_size = images.size() * 4;
    return m;
  }

  shm::CompletionMessage Next() {
    shm::CompletionMessage m;
    EXPECT_TRUE(segment_->completions().Pop(&m, std::chrono::seconds(30)).ok());
    return m;
  }

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<shm::Segment> segment_;
  std::thread worker_thread_;
  Status worker_status_;
};

TEST_F(StagedWorkerTest, GrantedRowsJoinAndTheCompletionCarriesThem) {
  std::vector<float> first = Images(2, 6), later = Images(2, 7);
  std::vector<float> all = first;
  all.insert(all.end(), later.begin(), later.end());
  auto reference = Load("staged_cnn.pt");
  const std::vector<float> want = Reference(*reference, all, 4);

  shm::BatchMessage batch = Describe(first, 2, 0);
  batch.flags = shm::kBatchAllowTopUp;
  segment_->header()->queued_rows_hint.store(2);  // the agent says rows are waiting
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  // After stage 1: nothing queued (not final), so it asks again after stage 2.
  shm::CompletionMessage q1 = Next();
  ASSERT_EQ(q1.kind, shm::CompletionKind::kTopUpQuery);
  EXPECT_EQ(q1.batch_id, 42u);
  EXPECT_EQ(q1.stages_done, 1u);
  EXPECT_EQ(q1.num_stages, 4u);
  EXPECT_EQ(q1.rows, 2);
  EXPECT_GT(q1.compute_ns, 0u);
  shm::BatchMessage none;
  std::memset(&none, 0, sizeof(none));
  none.batch_id = 42;
  ASSERT_TRUE(segment_->topups().Push(none, std::chrono::seconds(5)).ok());
  shm::CompletionMessage q2 = Next();
  ASSERT_EQ(q2.kind, shm::CompletionKind::kTopUpQuery);
  EXPECT_EQ(q2.stages_done, 2u);
  // Grant two rows, written after the batch's own.
  shm::BatchMessage grant = Describe(later, 2, 2 * kRow * 4);
  ASSERT_TRUE(segment_->topups().Push(grant, std::chrono::seconds(5)).ok());
  // Rows joined: no more queries; the batch completes with all four rows.
  shm::CompletionMessage done = Next();
  ASSERT_EQ(done.kind, shm::CompletionKind::kDone);
  ASSERT_EQ(done.status, shm::CompletionStatus::kOk) << done.error;
  EXPECT_EQ(done.rows, 4);
  EXPECT_EQ(done.num_stages, 4u);
  for (int k = 0; k < 4; ++k) EXPECT_GT(done.stage_ns[k], 0u) << "stage " << k;
  ASSERT_EQ(done.num_tensors, 1u);
  EXPECT_EQ(done.tensors[0].shape[0], 4);
  ExpectClose(reinterpret_cast<const float*>(segment_->output_slab(0) + done.tensors[0].offset),
              want);
}

TEST_F(StagedWorkerTest, AFinalAnswerStopsTheQueriesAndBatchesWithoutTheFlagNeverAsk) {
  std::vector<float> x = Images(1, 8);
  shm::BatchMessage batch = Describe(x, 1, 0);
  batch.flags = shm::kBatchAllowTopUp;
  segment_->header()->queued_rows_hint.store(1);
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  ASSERT_EQ(Next().kind, shm::CompletionKind::kTopUpQuery);
  shm::BatchMessage final_answer;
  std::memset(&final_answer, 0, sizeof(final_answer));
  final_answer.batch_id = 42;
  final_answer.flags = shm::kGrantFinal;
  ASSERT_TRUE(segment_->topups().Push(final_answer, std::chrono::seconds(5)).ok());
  shm::CompletionMessage done = Next();
  EXPECT_EQ(done.kind, shm::CompletionKind::kDone);
  EXPECT_EQ(done.rows, 1);

  batch.flags = 0;
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  done = Next();
  EXPECT_EQ(done.kind, shm::CompletionKind::kDone);
  EXPECT_EQ(done.status, shm::CompletionStatus::kOk) << done.error;
}

TEST_F(StagedWorkerTest, NothingQueuedMeansNoQuery) {
  std::vector<float> x = Images(1, 10);
  shm::BatchMessage batch = Describe(x, 1, 0);
  batch.flags = shm::kBatchAllowTopUp;
  segment_->header()->queued_rows_hint.store(0);
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  const shm::CompletionMessage done = Next();
  EXPECT_EQ(done.kind, shm::CompletionKind::kDone);
  EXPECT_EQ(done.status, shm::CompletionStatus::kOk) << done.error;
}

TEST_F(StagedWorkerTest, AMalformedGrantFailsTheBatchAndTheLoopGoesOn) {
  std::vector<float> x = Images(1, 9);
  shm::BatchMessage batch = Describe(x, 1, 0);
  batch.flags = shm::kBatchAllowTopUp;
  segment_->header()->queued_rows_hint.store(1);
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  ASSERT_EQ(Next().kind, shm::CompletionKind::kTopUpQuery);
  shm::BatchMessage grant = Describe(x, 1, kRow * 4);
  grant.tensors[0].offset = 1ull << 40;  // outside the slab
  ASSERT_TRUE(segment_->topups().Push(grant, std::chrono::seconds(5)).ok());
  shm::CompletionMessage done = Next();
  EXPECT_EQ(done.kind, shm::CompletionKind::kDone);
  EXPECT_EQ(done.status, shm::CompletionStatus::kError);
  batch.flags = 0;
  ASSERT_TRUE(segment_->requests().Push(batch, std::chrono::seconds(5)).ok());
  EXPECT_EQ(Next().status, shm::CompletionStatus::kOk);
}

}  // namespace
}  // namespace packrat::runtime
