#include "runtime/runtime_flags.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace packrat::runtime {
namespace {

TEST(ParseIntListTest, ReadsCommaSeparatedIntegers) {
  auto values = ParseIntList("4,-8,16");
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(*values, (std::vector<int64_t>{4, -8, 16}));
  auto none = ParseIntList("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParseIntListTest, RefusesEmptyAndNonIntegerItems) {
  for (const char* bad : {"1,,2", "1,", ",1", "1,x", "1.5", "3 "}) {
    EXPECT_EQ(ParseIntList(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseRowSpecTest, ReadsTheDatatypeAndTheRowShape) {
  DataType type = DataType::kInvalid;
  std::vector<int64_t> shape = {99};
  ASSERT_TRUE(ParseRowSpec("--input", "FP32:3,224,224", &type, &shape).ok());
  EXPECT_EQ(type, DataType::kFp32);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 224, 224}));
  // No dimensions: one element per row, and the old shape is gone.
  ASSERT_TRUE(ParseRowSpec("--output", "INT64", &type, &shape).ok());
  EXPECT_EQ(type, DataType::kInt64);
  EXPECT_TRUE(shape.empty());
  ASSERT_TRUE(ParseRowSpec("--output", "BOOL:", &type, &shape).ok());
  EXPECT_EQ(type, DataType::kBool);
  EXPECT_TRUE(shape.empty());
}

TEST(ParseRowSpecTest, NamesTheFlagOnAnUnknownDatatypeOrBadDimensions) {
  DataType type = DataType::kInvalid;
  std::vector<int64_t> shape;
  const Status unknown = ParseRowSpec("--input", "FLOAT:3", &type, &shape);
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("--input"), std::string::npos);
  EXPECT_EQ(ParseRowSpec("--output", "FP32:3,x", &type, &shape).code(),
            StatusCode::kInvalidArgument);
}

TEST(ParseCommonFlagTest, TakesTheFlagsEveryRuntimeShares) {
  CommonFlags flags;
  const std::vector<std::pair<std::string, std::string>> given = {
      {"--segment", "packrat.1.demo.0"},
      {"--name", "demo/0"},
      {"--threads", "4"},
      {"--agent-pid", "77"},
      {"--cores", "2,3,4,5"},
      {"--warmup-batch", "1"},
      {"--warmup-batch", "8"},
      {"--warmup-iterations", "2"},
      {"--idle-spin-us", "0"},
      {"--idle-start-s", "2.5"},
      {"--warmup", "while-idle"},
  };
  for (const auto& [flag, value] : given) {
    auto taken = ParseCommonFlag(flag, value, &flags);
    ASSERT_TRUE(taken.ok()) << flag;
    EXPECT_TRUE(*taken) << flag;
  }
  EXPECT_EQ(flags.segment, "packrat.1.demo.0");
  EXPECT_EQ(flags.name, "demo/0");
  EXPECT_EQ(flags.threads, 4);
  EXPECT_EQ(flags.agent_pid, 77);
  EXPECT_EQ(flags.cores, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(flags.warmup_batches, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(flags.warmup_iterations, 2);
  EXPECT_EQ(flags.idle_spin_us, 0);
  EXPECT_EQ(flags.idle_start_s, 2.5);
  EXPECT_TRUE(flags.warmup_while_idle);
}

TEST(ParseCommonFlagTest, LeavesOtherFlagsToTheBinaryAndRefusesBadCores) {
  CommonFlags flags;
  auto other = ParseCommonFlag("--model", "resnet.pt", &flags);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
  EXPECT_EQ(ParseCommonFlag("--cores", "0,,1", &flags).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCommonFlag("--idle-start-s", "-1", &flags).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCommonFlag("--warmup", "sometimes", &flags).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrat::runtime
