#include "agent/model/set_diff.h"

#include <vector>

#include "gtest/gtest.h"

namespace packrat {
namespace {

RuntimeShape R(int threads, int64_t batch, std::vector<int> cpus, bool alive = true,
               int64_t capacity = 0) {
  return {threads, batch, capacity > 0 ? capacity : batch, alive, std::move(cpus)};
}

TEST(SetDiffTest, TheSamePlanKeepsEverything) {
  const SetDiff d = DiffSets({R(1, 4, {0}), R(1, 4, {1})}, {}, {{2, 1, 4}}, false);
  EXPECT_TRUE(d.Unchanged(2));
  EXPECT_EQ(d.keep.size(), 2u);
  EXPECT_TRUE(d.drop.empty());
  EXPECT_EQ(d.kept_cpus, (std::vector<int>{0, 1}));
}

TEST(SetDiffTest, KeepsMatchingShapesStartsTheRestAndDropsTheOthers) {
  // ⟨2,1,4⟩ -> ⟨1,1,4⟩ + ⟨1,2,8⟩ on a static plan: one thin runtime stays.
  const SetDiff d = DiffSets({R(1, 4, {0}), R(1, 4, {1})}, {}, {{1, 1, 4}, {1, 2, 8}}, false);
  ASSERT_EQ(d.keep.size(), 1u);
  EXPECT_EQ(d.keep[0], (std::pair<size_t, int64_t>{0, 4}));
  EXPECT_EQ(d.start, (std::vector<std::pair<int, int64_t>>{{2, 8}}));
  EXPECT_EQ(d.drop, (std::vector<size_t>{1}));
  EXPECT_FALSE(d.Unchanged(2));
}

TEST(SetDiffTest, ResizableRuntimesServeAnotherBatchOfTheirThreadCount) {
  const std::vector<RuntimeShape> serving = {R(1, 4, {0}, true, 8), R(1, 4, {1}, true, 8)};
  const SetDiff resized = DiffSets(serving, {}, {{2, 1, 8}}, true);
  EXPECT_EQ(resized.resized, 2u);
  EXPECT_TRUE(resized.start.empty());
  EXPECT_EQ(resized.keep[1], (std::pair<size_t, int64_t>{1, 8}));
  // Without room (capacity 4) or without resizable runtimes, new ones start.
  EXPECT_EQ(DiffSets({R(1, 4, {0}), R(1, 4, {1})}, {}, {{2, 1, 8}}, true).start.size(), 2u);
  EXPECT_EQ(DiffSets(serving, {}, {{2, 1, 8}}, false).start.size(), 2u);
}

TEST(SetDiffTest, DeadRuntimesAreNeverKept) {
  const SetDiff d = DiffSets({R(1, 4, {0}), R(1, 4, {1}, false)}, {}, {{2, 1, 4}}, false);
  EXPECT_EQ(d.keep.size(), 1u);
  EXPECT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.drop, (std::vector<size_t>{1}));
}

TEST(SetDiffTest, TheMostRecentlyParkedRuntimeOnFreeCpusIsTakenFirst) {
  // Serving one fat runtime on CPUs 0-1; parked, oldest first: thin ones on 0, on 2 and on 3.
  const std::vector<RuntimeShape> parked = {R(1, 4, {0}), R(1, 4, {2}), R(1, 4, {3})};
  const SetDiff d = DiffSets({R(2, 1, {0, 1})}, parked, {{1, 2, 1}, {2, 1, 4}}, false);
  EXPECT_EQ(d.keep.size(), 1u);
  // The newest two whose CPUs nobody kept: index 2 (CPU 3), then 1 (CPU 2).
  ASSERT_EQ(d.unpark.size(), 2u);
  EXPECT_EQ(d.unpark[0].first, 2u);
  EXPECT_EQ(d.unpark[1].first, 1u);
  EXPECT_TRUE(d.start.empty());
}

TEST(SetDiffTest, AParkedRuntimeOnAKeptRuntimesCpusStaysParked) {
  const SetDiff d = DiffSets({R(1, 4, {0})}, {R(1, 4, {0})}, {{2, 1, 4}}, false);
  EXPECT_TRUE(d.unpark.empty());
  EXPECT_EQ(d.start, (std::vector<std::pair<int, int64_t>>{{1, 4}}));
}

TEST(SetDiffTest, ResizableParkedRuntimesServeAnyBatchTheyHaveRoomFor) {
  const std::vector<RuntimeShape> parked = {R(2, 1, {2, 3}, true, 8), R(2, 1, {4, 5}, false, 8)};
  const SetDiff d = DiffSets({R(1, 1, {0})}, parked, {{1, 2, 8}}, true);
  ASSERT_EQ(d.unpark.size(), 1u);
  EXPECT_EQ(d.unpark[0], (std::pair<size_t, int64_t>{0, 8}));  // the live one, at b = 8
  EXPECT_EQ(d.drop, (std::vector<size_t>{0}));
  EXPECT_EQ(DiffSets({R(1, 1, {0})}, parked, {{1, 2, 8}}, false).unpark.size(), 0u);
}

}  // namespace
}  // namespace packrat
