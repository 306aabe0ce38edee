// CpusToKeep: a shrinking share keeps whole runtimes, so that they serve on without a start.
#include "agent/model/share_shrink.h"

#include "gtest/gtest.h"

namespace packrat {
namespace {

TEST(ShareShrinkTest, KeepsWholeRuntimesLargestFirst) {
  // Four 6-CPU runtimes on a 24-CPU share, not in share order; keep 12 CPUs.
  const std::vector<int> share = {8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                  20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  const std::vector<std::vector<int>> runtimes = {{14, 15, 16, 17, 18, 19},
                                                  {26, 27, 28, 29, 30, 31},
                                                  {8, 9, 10, 11, 12, 13},
                                                  {20, 21, 22, 23, 24, 25}};
  EXPECT_EQ(CpusToKeep(share, 12, runtimes),
            (std::vector<int>{14, 15, 16, 17, 18, 19, 26, 27, 28, 29, 30, 31}));
}

TEST(ShareShrinkTest, FillsWithIdleCpusBeforeHeldOnes) {
  // One 3-CPU runtime on 0-2, one 2-CPU runtime on 3-4, CPUs 5-7 idle; keep 6.
  const std::vector<int> share = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(CpusToKeep(share, 6, {{0, 1, 2}, {3, 4}}), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  // Keep 4: the 3-CPU runtime, then an idle CPU rather than half of the 2-CPU one.
  EXPECT_EQ(CpusToKeep(share, 4, {{0, 1, 2}, {3, 4}}), (std::vector<int>{0, 1, 2, 5}));
}

TEST(ShareShrinkTest, RuntimesOutsideTheShareOrTooLargeAreSkipped) {
  const std::vector<int> share = {0, 1, 2, 3};
  // A runtime partly outside the share, and one larger than what is kept.
  EXPECT_EQ(CpusToKeep(share, 2, {{3, 4}, {0, 1, 2}}), (std::vector<int>{0, 1}));
  EXPECT_EQ(CpusToKeep(share, 4, {{0, 1}}), share);  // all of it
}

}  // namespace
}  // namespace packrat
