// ModelRunner on the generated TorchScript fixtures: loading, running, errors and the runtime's
// handling of what arrives through shared memory (runtime/worker.h).
#include "runtime/model_runner.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/worker.h"
#include "shm/segment.h"

namespace packrat::runtime {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;

std::unique_ptr<ModelRunner> Load(const std::string& file, std::vector<DataType> out_types = {}) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/" + file;
  o.output_types = std::move(out_types);
  auto r = ModelRunner::Create(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

RawTensor Floats(std::vector<float>& v, std::vector<int64_t> shape) {
  return RawTensor{DataType::kFp32, std::move(shape), v.data(), v.size() * sizeof(float)};
}

TEST(ModelRunnerTest, MissingFileIsNotFound) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/does_not_exist.pt";
  EXPECT_EQ(ModelRunner::Create(o).status().code(), StatusCode::kNotFound);
}

TEST(ModelRunnerTest, NonTorchScriptFileIsInvalidArgument) {
  ModelRunnerOptions o;
  o.model_path = kModels + "/not_a_model.pt";
  const auto r = ModelRunner::Create(o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("cannot load TorchScript model"), std::string::npos);
}

TEST(ModelRunnerTest, BatchRowsEqualSingleRows) {
  auto runner = Load("tiny_mlp.pt");
  ASSERT_TRUE(runner);
  std::vector<float> batch(4 * 16);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = 0.01f * static_cast<float>(i) - 0.3f;
  std::vector<uint8_t> out(4096);
  std::vector<RawTensor> outputs;
  ASSERT_TRUE(runner->Run({Floats(batch, {4, 16})}, out.data(), out.size(), &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(outputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(outputs[0].data) % 64,
            reinterpret_cast<uintptr_t>(out.data()) % 64);
  std::vector<float> batched(static_cast<float*>(outputs[0].data),
                             static_cast<float*>(outputs[0].data) + 32);
  for (int row = 0; row < 4; ++row) {
    std::vector<float> one(batch.begin() + row * 16, batch.begin() + (row + 1) * 16);
    std::vector<uint8_t> out1(4096);
    std::vector<RawTensor> o1;
    ASSERT_TRUE(runner->Run({Floats(one, {1, 16})}, out1.data(), out1.size(), &o1).ok());
    const float* p = static_cast<const float*>(o1[0].data);
    for (int k = 0; k < 8; ++k) EXPECT_NEAR(p[k], batched[row * 8 + k], 1e-6);
  }
}

TEST(ModelRunnerTest, MultipleOutputsAndDatatypeConversion) {
  // two_head returns (FP32 scores, INT64 argmax); ask for FP64 scores to exercise conversion.
  auto runner = Load("two_head.pt", {DataType::kFp64, DataType::kInt64});
  ASSERT_TRUE(runner);
  std::vector<float> x(3 * 8, 0.5f);
  std::vector<int64_t> ids(3 * 4, 7);
  RawTensor id{DataType::kInt64, {3, 4}, ids.data(), ids.size() * 8};
  std::vector<uint8_t> out(4096);
  std::vector<RawTensor> outputs;
  ASSERT_TRUE(runner->Run({Floats(x, {3, 8}), id}, out.data(), out.size(), &outputs).ok());
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].datatype, DataType::kFp64);
  EXPECT_EQ(outputs[0].byte_size, 3u * 5 * 8);
  EXPECT_EQ(outputs[1].datatype, DataType::kInt64);
  EXPECT_EQ(outputs[1].shape, (std::vector<int64_t>{3}));
}

TEST(ModelRunnerTest, WrongInputShapeIsAnErrorNotACrash) {
  auto runner = Load("tiny_mlp.pt");
  ASSERT_TRUE(runner);
  std::vector<float> x(2 * 5, 1.0f);
  std::vector<uint8_t> out(4096);
  std::vector<RawTensor> outputs;
  const Status s = runner->Run({Floats(x, {2, 5})}, out.data(), out.size(), &outputs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ModelRunnerTest, OutputsLargerThanTheSlabAreResourceExhausted) {
  auto runner = Load("tiny_mlp.pt");
  ASSERT_TRUE(runner);
  std::vector<float> x(64 * 16, 1.0f);
  std::vector<uint8_t> out(128);
  std::vector<RawTensor> outputs;
  EXPECT_EQ(runner->Run({Floats(x, {64, 16})}, out.data(), out.size(), &outputs).code(),
            StatusCode::kResourceExhausted);
}

// The backing hook sees the bytes every output will take (two_head: 3×5 FP64, then 3 INT64 at
// the next 64-byte boundary) before anything is written; its error fails the batch untouched.
TEST(ModelRunnerTest, OutputBackingComesBeforeTheWritesAndItsErrorFailsTheBatch) {
  auto runner = Load("two_head.pt", {DataType::kFp64, DataType::kInt64});
  ASSERT_TRUE(runner);
  std::vector<float> x(3 * 8, 0.5f);
  std::vector<int64_t> ids(3 * 4, 7);
  RawTensor id{DataType::kInt64, {3, 4}, ids.data(), ids.size() * 8};
  std::vector<uint8_t> out(4096, 0xee);
  std::vector<std::pair<uint8_t*, size_t>> asked;
  runner->set_output_backing([&](uint8_t* at, size_t bytes) {
    asked.emplace_back(at, bytes);
    return Unavailable("no room in shared memory (/dev/shm)");
  });
  std::vector<RawTensor> outputs;
  const Status s = runner->Run({Floats(x, {3, 8}), id}, out.data(), out.size(), &outputs);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].first, out.data());
  EXPECT_EQ(asked[0].second, 128u + 3 * 8);
  EXPECT_TRUE(outputs.empty());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xee; }));

  runner->set_output_backing([&](uint8_t*, size_t) { return Status::Ok(); });
  ASSERT_TRUE(runner->Run({Floats(x, {3, 8}), id}, out.data(), out.size(), &outputs).ok());
  EXPECT_EQ(outputs.size(), 2u);
}

TEST(ModelRunnerTest, WarmupRunsAtEachBatchSize) {
  auto runner = Load("small_cnn.pt");
  ASSERT_TRUE(runner);
  EXPECT_TRUE(runner->Warmup({InputSpec{DataType::kFp32, {3, 32, 32}}}, {1, 4}, 2).ok());
  EXPECT_FALSE(runner->Warmup({InputSpec{DataType::kFp32, {3, 31}}}, {1}, 1).ok());
}

// The runtime's serving loop on a real segment, driven from this process.
class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runner_ = Load("tiny_mlp.pt");
    ASSERT_TRUE(runner_);
    shm::SegmentOptions o;
    o.num_slots = 2;
    o.slot_input_bytes = 8 * 16 * 4;
    o.slot_output_bytes = 8 * 8 * 4;
    auto seg = shm::Segment::Create(shm::Segment::MakeName(getpid(), "worker_test"), o);
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

  shm::BatchMessage Message(uint32_t slot, int64_t rows) {
    shm::BatchMessage m;
    std::memset(&m, 0, sizeof(m));
    m.batch_id = 7;
    m.slot = slot;
    m.rows = rows;
    m.num_tensors = 1;
    m.tensors[0].datatype = static_cast<uint8_t>(DataType::kFp32);
    m.tensors[0].ndim = 2;
    m.tensors[0].shape[0] = rows;
    m.tensors[0].shape[1] = 16;
    m.tensors[0].offset = 0;
    m.tensors[0].byte_size = rows * 16 * 4;
    return m;
  }

  shm::CompletionMessage RoundTrip(const shm::BatchMessage& m) {
    EXPECT_TRUE(segment_->requests().Push(m, std::chrono::seconds(5)).ok());
    shm::CompletionMessage done;
    EXPECT_TRUE(segment_->completions().Pop(&done, std::chrono::seconds(30)).ok());
    return done;
  }

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<shm::Segment> segment_;
  std::thread worker_thread_;
  Status worker_status_;
};

TEST_F(WorkerTest, RunsABatchFromTheSlab) {
  float* in = reinterpret_cast<float*>(segment_->input_slab(1));
  for (int i = 0; i < 3 * 16; ++i) in[i] = static_cast<float>(i % 5);
  const shm::CompletionMessage done = RoundTrip(Message(1, 3));
  EXPECT_EQ(done.status, shm::CompletionStatus::kOk) << done.error;
  EXPECT_EQ(done.batch_id, 7u);
  EXPECT_EQ(done.slot, 1u);
  ASSERT_EQ(done.num_tensors, 1u);
  EXPECT_EQ(done.tensors[0].shape[0], 3);
  EXPECT_EQ(done.tensors[0].shape[1], 8);
  EXPECT_EQ(done.tensors[0].byte_size, 3u * 8 * 4);
}

TEST_F(WorkerTest, MalformedMessagesGetErrorCompletionsAndTheLoopGoesOn) {
  shm::BatchMessage bad_slot = Message(5, 1);
  EXPECT_EQ(RoundTrip(bad_slot).status, shm::CompletionStatus::kError);
  shm::BatchMessage too_big = Message(0, 1);
  too_big.tensors[0].offset = 1 << 30;
  EXPECT_EQ(RoundTrip(too_big).status, shm::CompletionStatus::kError);
  shm::BatchMessage lying_size = Message(0, 1);
  lying_size.tensors[0].byte_size = 4;
  EXPECT_EQ(RoundTrip(lying_size).status, shm::CompletionStatus::kError);
  shm::BatchMessage bad_rank = Message(0, 1);
  bad_rank.tensors[0].ndim = 200;
  EXPECT_EQ(RoundTrip(bad_rank).status, shm::CompletionStatus::kError);
  shm::BatchMessage bad_type = Message(0, 1);
  bad_type.tensors[0].datatype = 99;
  EXPECT_EQ(RoundTrip(bad_type).status, shm::CompletionStatus::kError);
  shm::BatchMessage overflow = Message(0, 1);
  overflow.tensors[0].shape[1] = int64_t{1} << 62;
  EXPECT_EQ(RoundTrip(overflow).status, shm::CompletionStatus::kError);
  shm::BatchMessage many = Message(0, 1);
  many.num_tensors = 1000;
  EXPECT_EQ(RoundTrip(many).status, shm::CompletionStatus::kError);
  // Still serving.
  EXPECT_EQ(RoundTrip(Message(0, 2)).status, shm::CompletionStatus::kOk);
}

// Regression: the runtime once built its options as WorkerOptions{pid, {}}, a zero poll interval
// that turned every idle wait into a busy loop (an idle runtime spun a whole core).
TEST(WorkerOptionsTest, AZeroPollIntervalIsRaisedSoIdleWaitsSleep) {
  Worker worker(nullptr, nullptr, WorkerOptions{42, {}});
  EXPECT_GE(worker.options().poll_interval, std::chrono::milliseconds(1));
  EXPECT_EQ(worker.options().agent_pid, 42);
  EXPECT_EQ(Worker(nullptr, nullptr, WorkerOptions{}).options().poll_interval,
            std::chrono::milliseconds(500));
}

TEST_F(WorkerTest, ClosingTheRingEndsTheLoop) {
  segment_->requests().Close();
  worker_thread_.join();
  EXPECT_TRUE(worker_status_.ok());
}

}  // namespace
}  // namespace packrat::runtime
