#include "agent/batching/slice_io.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/agent/batching/fake_executor.h"

namespace packrat {
namespace {

using batching_test::Completion;
using batching_test::MakeRequest;

TensorSpec Spec(DataType type, std::vector<int64_t> shape) {
  return TensorSpec{"t", type, std::move(shape)};
}

TEST(SlabBytesTest, FixedRowsScaleVariableRowsTakeTheirRoom) {
  // 3 × 4 bytes a row: 5 rows are 60 bytes, aligned to 64, plus one gap of 64.
  EXPECT_EQ(SlabBytes({Spec(DataType::kFp32, {-1, 3})}, 5, 1 << 20), 128u);
  EXPECT_EQ(SlabBytes({Spec(DataType::kFp32, {-1, 3})}, 6, 1 << 20), 192u);
  // A -1 beyond the batch dim: the room, whatever the rows.
  EXPECT_EQ(SlabBytes({Spec(DataType::kInt64, {-1, -1})}, 1, 4096), 4096u + 64);
  EXPECT_EQ(SlabBytes({Spec(DataType::kInt64, {-1, -1})}, 64, 4096), 4096u + 64);
  EXPECT_EQ(SlabBytes({Spec(DataType::kFp32, {-1, 3}), Spec(DataType::kInt64, {-1, -1})}, 5, 4096),
            128u + 4096 + 64);
}

TEST(RowsThatFitTest, CountsRowsWithEveryInputsAlignment) {
  Completion done;
  const auto request = MakeRequest(0, 3, &done, SteadyTime{}, 100);  // one input, 800-byte rows
  EXPECT_EQ(RowsThatFit(*request, 0), 0);
  EXPECT_EQ(RowsThatFit(*request, 800 + 62), 0);  // 63 bytes of padding are allowed for
  EXPECT_EQ(RowsThatFit(*request, 800 + 63), 1);
  EXPECT_EQ(RowsThatFit(*request, 4 * 800 + 63), 4);
  EXPECT_EQ(RowsThatFit(*request, 5 * 800 + 62), 4);
}

// A request of `rows` rows with two UINT8 inputs of `a` and `b` bytes a row: odd sizes, so
// that the second input's start needs padding.
std::shared_ptr<InferenceRequest> TwoInputs(int64_t rows, int64_t a, int64_t b, Completion* done) {
  DecodedRequest d;
  d.id = "two";
  d.rows = rows;
  for (const int64_t width : {a, b}) {
    d.owned.emplace_back(static_cast<size_t>(rows * width), uint8_t{7});
    d.inputs.push_back({"in" + std::to_string(d.inputs.size()),
                        DataType::kUint8,
                        {rows, width},
                        d.owned.back().data(),
                        d.owned.back().size()});
  }
  return std::make_shared<InferenceRequest>(std::move(d), done->Callback(), SteadyTime{});
}

// What RowsThatFit counts, GatherInputs lays out within the capacity; rows beyond the
// capacity's bytes never fit.
TEST(RowsThatFitTest, TheRowsItCountsGather) {
  for (const auto& [a, b] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {13, 5}, {100, 3}, {800, 0}, {257, 1000}}) {
    for (const uint64_t capacity : {64u, 130u, 1000u, 4096u, 10'000u}) {
      SCOPED_TRACE("rows of " + std::to_string(a) + " + " + std::to_string(b) + " bytes, " +
                   std::to_string(capacity) + "-byte slab");
      Completion done;
      const int64_t rows = 64;
      const auto request = TwoInputs(rows, a, b, &done);
      const int64_t fit = RowsThatFit(*request, capacity);
      std::vector<uint8_t> buffer(capacity + 64);
      auto* slab = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) /
                                              64 * 64);  // slabs are aligned
      std::vector<TensorView> inputs;
      auto gather = [&](int64_t n) {
        WorkSlice slice;
        slice.rows = n;
        slice.ranges.push_back(RowRange{request, 0, n});
        return GatherInputs(slice, slab, capacity, &inputs);
      };
      if (fit > 0) {
        EXPECT_TRUE(gather(std::min(fit, rows)).ok()) << fit << " rows";
      }
      const int64_t over = static_cast<int64_t>(capacity) / (a + b) + 1;
      if (over <= rows) {
        EXPECT_EQ(gather(over).code(), StatusCode::kOutOfRange) << over;
      }
      EXPECT_LT(fit, over);
    }
  }
}

TEST(SliceInputBytesTest, IsWhereGatherInputsEndsAndAllItNeeds) {
  for (const auto& [a, b] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {13, 5}, {64, 64}, {800, 0}, {0, 7}}) {
    SCOPED_TRACE("rows of " + std::to_string(a) + " + " + std::to_string(b) + " bytes");
    Completion done;
    const auto request = TwoInputs(5, a, b, &done);
    WorkSlice slice;
    slice.rows = 3;
    slice.ranges.push_back(RowRange{request, 1, 3});
    const uint64_t need = SliceInputBytes(slice);
    std::vector<uint8_t> buffer(need + 128);
    auto* slab =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) / 64 * 64);
    std::vector<TensorView> inputs;
    ASSERT_TRUE(GatherInputs(slice, slab, need, &inputs).ok());
    ASSERT_EQ(inputs.size(), 2u);
    EXPECT_EQ(static_cast<uint64_t>(inputs[1].data + inputs[1].byte_size - slab), need);
    if (need > 0) {
      EXPECT_EQ(GatherInputs(slice, slab, need - 1, &inputs).code(), StatusCode::kOutOfRange);
    }
  }
}

TEST(SplitByRangeTest, OneSlicePerRangeAndTheOriginalDoneRunsOnceAfterAll) {
  Completion a, b;
  const auto first = MakeRequest(0, 4, &a, SteadyTime{}, 3);
  const auto second = MakeRequest(1, 2, &b, SteadyTime{}, 3);
  WorkSlice slice;
  slice.batch_id = 9;
  slice.rows = 5;
  slice.retried = true;
  slice.ranges.push_back(RowRange{first, 1, 3});
  slice.ranges.push_back(RowRange{second, 0, 2});
  int done = 0;
  slice.on_done = [&] { ++done; };
  std::vector<WorkSlice> parts = SplitByRange(std::move(slice));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].rows, 3);
  EXPECT_EQ(parts[0].ranges[0].request, first);
  EXPECT_EQ(parts[0].ranges[0].begin, 1);
  EXPECT_EQ(parts[1].rows, 2);
  EXPECT_EQ(parts[1].ranges[0].request, second);
  for (const WorkSlice& p : parts) {
    EXPECT_EQ(p.batch_id, 9u);
    EXPECT_TRUE(p.retried);
  }
  parts[1].on_done();
  EXPECT_EQ(done, 0);
  parts[0].on_done();
  EXPECT_EQ(done, 1);
}

TEST(RowsThatFitTest, RowsWithoutBytesAlwaysFit) {
  Completion done;
  const auto request = MakeRequest(0, 2, &done, SteadyTime{}, 0);
  EXPECT_EQ(RowsThatFit(*request, 64), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace packrat
