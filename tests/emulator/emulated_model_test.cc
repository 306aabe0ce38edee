#include "emulator/emulated_model.h"

#include <gtest/gtest.h>

#include <cstring>

namespace packrat::emulator {
namespace {

using std::chrono::microseconds;

Profile TestProfile() {
  auto p = Profile::ParseCsv(
      "threads,batch,latency_ms\n"
      "1,1,10\n1,2,18\n1,4,34\n"
      "2,1,6\n2,4,20\n",
      "test");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

TEST(EmulatedModelTest, LatencyIsTheProfileInterpolatedAsThePlannerReadsIt) {
  auto model = EmulatedModel::Create(TestProfile(), 2, {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->Latency(1), microseconds(6000));
  EXPECT_EQ(model->Latency(4), microseconds(20000));
  // Linear between profiled batch sizes: b = 2 and 3 lie between 1 (6 ms) and 4 (20 ms).
  EXPECT_NEAR(model->Latency(2).count(), 6e6 + 14e6 / 3, 1);
  EXPECT_NEAR(model->Latency(3).count(), 6e6 + 2 * 14e6 / 3, 1);
  // Beyond the largest: in proportion to it.
  EXPECT_EQ(model->Latency(8), microseconds(40000));
  // The agent's own reading of the same profile, for every b.
  const Profile profile = TestProfile();
  for (int64_t b = 1; b <= 16; ++b) {
    EXPECT_NEAR(model->Latency(b).count() / 1e6, *profile.InterpolatedLatency(2, b), 1e-6) << b;
  }
}

TEST(EmulatedModelTest, AThreadCountTheProfileLacksCannotBeEmulated) {
  EXPECT_EQ(EmulatedModel::Create(TestProfile(), 4, {}).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(EmulatedModelTest, OutputsAreZeroFilledAlignedAndOfTheDeclaredShapes) {
  auto model = EmulatedModel::Create(
      TestProfile(), 1,
      {{DataType::kFp32, {3}}, {DataType::kInt64, {-1, 2}}, {DataType::kUint8, {}}});
  ASSERT_TRUE(model.ok());
  std::vector<uint8_t> slab(4096, 0xAB);
  uint64_t backed = 0;
  shm::CompletionMessage done;
  ASSERT_TRUE(model
                  ->WriteOutputs(
                      5, slab.data(), slab.size(),
                      [&](uint64_t bytes) {
                        backed = bytes;
                        return Status::Ok();
                      },
                      &done)
                  .ok());
  ASSERT_EQ(done.num_tensors, 3u);
  const shm::TensorDesc& y = done.tensors[0];
  EXPECT_EQ(y.datatype, static_cast<uint8_t>(DataType::kFp32));
  ASSERT_EQ(y.ndim, 2);
  EXPECT_EQ(y.shape[0], 5);
  EXPECT_EQ(y.shape[1], 3);
  EXPECT_EQ(y.offset, 0u);
  EXPECT_EQ(y.byte_size, 5u * 3 * 4);
  const shm::TensorDesc& z = done.tensors[1];
  ASSERT_EQ(z.ndim, 3);
  EXPECT_EQ(z.shape[1], 1);  // a varying dim is answered as 1
  EXPECT_EQ(z.shape[2], 2);
  EXPECT_EQ(z.offset, 64u);  // 64-byte aligned after y's 60 bytes
  EXPECT_EQ(z.byte_size, 5u * 2 * 8);
  const shm::TensorDesc& w = done.tensors[2];
  EXPECT_EQ(w.ndim, 1);
  EXPECT_EQ(w.offset, 192u);  // after z's 80 bytes at 64
  EXPECT_EQ(backed, 192u + 5);
  for (const shm::TensorDesc* d : {&y, &z, &w}) {
    for (uint64_t i = 0; i < d->byte_size; ++i) ASSERT_EQ(slab[d->offset + i], 0) << i;
  }
  EXPECT_EQ(slab[60], 0xAB);  // padding untouched
}

TEST(EmulatedModelTest, OutputsThatDoNotFitOrCannotBeBackedFailTheSlice) {
  auto model = EmulatedModel::Create(TestProfile(), 1, {{DataType::kFp32, {1000}}});
  ASSERT_TRUE(model.ok());
  std::vector<uint8_t> slab(4096);
  shm::CompletionMessage done;
  EXPECT_EQ(model->WriteOutputs(2, slab.data(), slab.size(), nullptr, &done).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(model
                ->WriteOutputs(
                    1, slab.data(), slab.size(),
                    [](uint64_t) { return Unavailable("no room in /dev/shm"); }, &done)
                .code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace packrat::emulator
