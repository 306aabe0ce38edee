#include "runtime/batch_message.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace packrat::runtime {
namespace {

shm::CompletionMessage Stale() {
  shm::CompletionMessage done;
  std::memset(&done, 0x5a, sizeof(done));  // what the last batch of the slot left there
  return done;
}

TEST(BatchMessageTest, ACompletionBeginsEmptyForItsBatch) {
  shm::BatchMessage msg{};
  msg.batch_id = 41;
  msg.slot = 1;
  shm::CompletionMessage done = Stale();
  BeginCompletion(msg, &done);
  EXPECT_EQ(done.batch_id, 41u);
  EXPECT_EQ(done.slot, 1u);
  EXPECT_EQ(done.kind, shm::CompletionKind::kDone);
  EXPECT_EQ(done.num_tensors, 0u);
  EXPECT_EQ(done.compute_ns, 0u);
  EXPECT_EQ(done.rows, 0);
  EXPECT_EQ(done.step_rows, 0);
  EXPECT_EQ(done.stages_done, 0u);
  EXPECT_EQ(done.num_stages, 0u);
  EXPECT_STREQ(done.error, "");
}

TEST(BatchMessageTest, AFailedCompletionCarriesTheReasonCutToFit) {
  shm::CompletionMessage done = Stale();
  FailCompletion(InvalidArgument("bad tensor shape"), &done);
  EXPECT_EQ(done.status, shm::CompletionStatus::kError);
  EXPECT_EQ(done.num_tensors, 0u);
  EXPECT_STREQ(done.error, "bad tensor shape");

  const std::string long_reason(2 * shm::kErrorTextSize, 'x');
  FailCompletion(Unavailable(long_reason), &done);
  EXPECT_EQ(done.status, shm::CompletionStatus::kUnavailable);
  EXPECT_EQ(std::string(done.error), long_reason.substr(0, shm::kErrorTextSize - 1));
}

TEST(BatchMessageTest, UnpackRefusesASlotOutOfRange) {
  shm::BatchMessage msg{};
  msg.slot = 2;
  std::vector<RawTensor> inputs;
  const Status s = UnpackBatchMessage(
      msg, /*num_slots=*/2, /*capacity=*/1024, [](uint32_t) { return nullptr; }, &inputs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrat::runtime
