#include "agent/pool/cpu_list.h"

#include <gtest/gtest.h>

namespace packrat {
namespace {

TEST(CpuListTest, ParsesKernelSyntax) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList("5"), (std::vector<int>{5}));
  EXPECT_EQ(*ParseCpuList("3,1,1-2"), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(ParseCpuList("\n")->empty());
}

TEST(CpuListTest, RejectsGarbage) {
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "1 2", "0-99999"}) {
    EXPECT_EQ(ParseCpuList(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CpuListTest, FormatsShortestRanges) {
  EXPECT_EQ(FormatCpuList({8, 0, 1, 2, 3, 11, 10}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({4}), "4");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({1, 1, 2}), "1-2");
}

}  // namespace
}  // namespace packrat
