#include "common/load_report.h"

#include "gtest/gtest.h"

namespace packrat {
namespace {

TEST(LoadReportTest, ParsesKeyValueItemsInOrder) {
  const LoadReport r = LoadReport::Parse("kernel=bf16+cl checked=1 max_rel_error=0.004 fallback=0");
  ASSERT_EQ(r.items().size(), 4u);
  EXPECT_EQ(r.items()[0].first, "kernel");
  EXPECT_EQ(r.Get("kernel"), "bf16+cl");
  EXPECT_EQ(r.Int("checked"), 1);
  EXPECT_DOUBLE_EQ(r.Number("max_rel_error"), 0.004);
  EXPECT_FALSE(r.Get("vocab").has_value());
  EXPECT_EQ(r.Int("vocab", 7), 7);
}

TEST(LoadReportTest, SkipsMalformedItemsAndNonNumbers) {
  const LoadReport r = LoadReport::Parse("  stray =x max_len=12x vocab=256  ");
  EXPECT_EQ(r.Get(""), std::nullopt);
  EXPECT_EQ(r.Int("max_len", -1), -1);  // not an integer
  EXPECT_EQ(r.Int("vocab"), 256);
  EXPECT_DOUBLE_EQ(r.Number("max_len", 2.5), 2.5);
  EXPECT_TRUE(LoadReport::Parse("").empty());
}

}  // namespace
}  // namespace packrat
