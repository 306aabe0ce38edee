// InferenceRequest's row accounting: the rows-finished observer sees every row exactly once,
// delivered or failed, and always before the completion callback (which answers the client).
#include "agent/batching/inference_request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "agent/kserve/shared_memory_registry.h"
#include "tests/agent/batching/fake_executor.h"
#include "tests/support/shm_object.h"

namespace packrat {
namespace {

using batching_test::MakeDecoded;

// The output view of a fake 1-column INT64 model over `rows` rows.
std::vector<TensorView> Outputs(const std::vector<int64_t>& values) {
  TensorView v;
  v.name = "y";
  v.datatype = DataType::kInt64;
  v.shape = {static_cast<int64_t>(values.size()), 1};
  v.data = reinterpret_cast<const uint8_t*>(values.data());
  v.byte_size = values.size() * sizeof(int64_t);
  return {v};
}

TEST(InferenceRequestTest, ObserverCountsEveryRowBeforeTheCallbackRuns) {
  std::atomic<int64_t> in_system{5};
  int64_t seen_by_callback = -1;
  int calls = 0;
  InferenceRequest request(
      MakeDecoded(1, 5),
      [&](const Status& s, InferenceRequest&) {
        EXPECT_TRUE(s.ok()) << s.ToString();
        seen_by_callback = in_system.load();
        ++calls;
      },
      SteadyTime{});
  request.set_rows_finished_observer([&](int64_t n) { in_system -= n; });
  const std::vector<int64_t> values = {10, 11, 12, 13, 14};
  request.DeliverRows(0, 2, Outputs(values), 0);
  EXPECT_EQ(in_system.load(), 3);
  EXPECT_EQ(calls, 0);
  request.DeliverRows(2, 3, Outputs(values), 2);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_by_callback, 0);  // no row of an answered request is still counted
}

TEST(InferenceRequestTest, FailedRowsAreCountedOutToo) {
  std::atomic<int64_t> in_system{4};
  std::atomic<int> calls{0};
  InferenceRequest request(
      MakeDecoded(2, 4),
      [&](const Status& s, InferenceRequest&) {
        EXPECT_EQ(s.code(), StatusCode::kUnavailable);
        EXPECT_EQ(in_system.load(), 0);
        ++calls;
      },
      SteadyTime{});
  request.set_rows_finished_observer([&](int64_t n) { in_system -= n; });
  // Slices finish on different completion threads at once.
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { request.FailRows(1, Unavailable("the instance died")); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(in_system.load(), 0);
}

// An output with a zero-sized dim has no bytes: the request gathers its shape from the
// slices and copies nothing (the view's buffer may be null).
TEST(InferenceRequestTest, ZeroSizedOutputsAreGatheredWithoutCopying) {
  int calls = 0;
  InferenceRequest request(
      MakeDecoded(3, 3),
      [&](const Status& s, InferenceRequest& r) {
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_EQ(r.outputs().size(), 1u);
        EXPECT_EQ(r.outputs()[0].shape, (std::vector<int64_t>{3, 0}));
        EXPECT_TRUE(r.outputs()[0].bytes.empty());
        ++calls;
      },
      SteadyTime{});
  TensorView empty;
  empty.name = "y";
  empty.datatype = DataType::kFp32;
  empty.shape = {2, 0};
  empty.data = nullptr;
  empty.byte_size = 0;
  request.DeliverRows(0, 2, {empty}, 0);
  empty.shape = {1, 0};
  request.DeliverRows(2, 1, {empty}, 0);
  EXPECT_EQ(calls, 1);
}

// A later slice whose output is shaped otherwise than the first's fails the request, also
// when the first had no bytes.
TEST(InferenceRequestTest, AnOutputThatChangesShapeAfterAnEmptySliceFails) {
  Status seen;
  InferenceRequest request(
      MakeDecoded(4, 3), [&](const Status& s, InferenceRequest&) { seen = s; }, SteadyTime{});
  TensorView empty;
  empty.name = "y";
  empty.datatype = DataType::kFp32;
  empty.shape = {2, 0};
  request.DeliverRows(0, 2, {empty}, 0);
  const std::vector<float> values(5, 1.0f);
  TensorView full = empty;
  full.shape = {1, 5};
  full.data = reinterpret_cast<const uint8_t*>(values.data());
  full.byte_size = values.size() * sizeof(float);
  request.DeliverRows(2, 1, {full}, 0);
  EXPECT_EQ(seen.code(), StatusCode::kInternal) << seen.ToString();
}

// A client may unregister its shared-memory regions as soon as it has its answer: the answer
// is sent from the completion callback, so the request lets go of its leases there, not when
// the last slice drops it.
TEST(InferenceRequestTest, TheCallbackReleasesTheSharedMemoryLeasesBeforeTheAnswer) {
  testing::ShmObject object(4096);
  SharedMemoryRegistry regions;
  ASSERT_TRUE(regions.Register("in", object.key(), 0, 1024).ok());
  ASSERT_TRUE(regions.Register("out", object.key(), 1024, 1024).ok());
  DecodedRequest decoded = MakeDecoded(5, 2);
  {
    StatusOr<SharedMemorySpan> in = regions.Resolve({"in", 32, 0}, "input 'x'");
    StatusOr<SharedMemorySpan> out = regions.Resolve({"out", 48, 0}, "output 'y'");
    ASSERT_TRUE(in.ok() && out.ok());
    decoded.input_regions.push_back(std::move(in).value());
    decoded.outputs.push_back({"y", true, std::move(out).value()});
  }  // the request's are now the only leases
  Status held = Status::Ok();
  Status released = Status::Ok();
  auto request = std::make_shared<InferenceRequest>(
      std::move(decoded),
      [&](const Status&, InferenceRequest& req) {
        held = regions.Unregister("out");
        req.ReleaseSharedMemory();
        released = regions.Unregister("");  // what a client that has its answer may do
      },
      SteadyTime{});
  const std::vector<int64_t> values = {1, 2};
  request->DeliverRows(0, 2, Outputs(values), 0);
  EXPECT_EQ(held.code(), StatusCode::kAborted);
  EXPECT_TRUE(released.ok()) << released.ToString();  // the request itself is still alive
}

}  // namespace
}  // namespace packrat
