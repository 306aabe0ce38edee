// One model's statistics as the statistics extension reports them, and their JSON.
#include "agent/metrics/inference_statistics.h"

#include <chrono>
#include <thread>
#include <vector>

#include "agent/kserve/statistics_json.h"
#include "gtest/gtest.h"

namespace packrat::metrics {
namespace {

using std::chrono::nanoseconds;

TEST(InferenceStatisticsTest, CountsRequestsAndEachRequestOfAnExecutedSlice) {
  InferenceStatistics s;
  EXPECT_EQ(s.Read().last_inference_ms, 0u);
  s.RecordQueued(nanoseconds(100));
  s.RecordQueued(nanoseconds(300));
  // One slice of 5 rows from two requests: each request counts the slice's times.
  s.RecordExecution(5, 2, nanoseconds(10), nanoseconds(1000), nanoseconds(20));
  s.RecordExecution(1, 1, nanoseconds(4), nanoseconds(400), nanoseconds(6));
  s.RecordAnswer(true, nanoseconds(2000));
  s.RecordAnswer(true, nanoseconds(1000));
  s.RecordAnswer(false, nanoseconds(50));
  const InferenceStatistics::Snapshot f = s.Read();
  EXPECT_GT(f.last_inference_ms, 0u);
  EXPECT_EQ(f.inference_count, 6u);
  EXPECT_EQ(f.execution_count, 2u);
  EXPECT_EQ(f.success.count, 2u);
  EXPECT_EQ(f.success.ns, 3000u);
  EXPECT_EQ(f.fail.count, 1u);
  EXPECT_EQ(f.fail.ns, 50u);
  EXPECT_EQ(f.queue.count, 2u);
  EXPECT_EQ(f.queue.ns, 400u);
  EXPECT_EQ(f.compute_input.count, 3u);
  EXPECT_EQ(f.compute_input.ns, 2 * 10u + 4u);
  EXPECT_EQ(f.compute_infer.ns, 2 * 1000u + 400u);
  EXPECT_EQ(f.compute_output.ns, 2 * 20u + 6u);
  ASSERT_EQ(f.batches.size(), 2u);
  EXPECT_EQ(f.batches[0].batch_size, 1u);
  EXPECT_EQ(f.batches[0].compute_infer.count, 1u);
  EXPECT_EQ(f.batches[0].compute_infer.ns, 400u);
  EXPECT_EQ(f.batches[1].batch_size, 5u);
  EXPECT_EQ(f.batches[1].compute_infer.count, 1u);  // per execution
  EXPECT_EQ(f.batches[1].compute_infer.ns, 1000u);
}

TEST(InferenceStatisticsTest, ConcurrentRecordsAllCount) {
  InferenceStatistics s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      for (int i = 0; i < 1000; ++i) {
        s.RecordAnswer(true, nanoseconds(1));
        s.RecordExecution(1 + t, 1, nanoseconds(1), nanoseconds(1), nanoseconds(1));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const InferenceStatistics::Snapshot f = s.Read();
  EXPECT_EQ(f.success.count, 4000u);
  EXPECT_EQ(f.execution_count, 4000u);
  EXPECT_EQ(f.inference_count, 1000u * (1 + 2 + 3 + 4));
  ASSERT_EQ(f.batches.size(), 4u);
  for (const auto& b : f.batches) EXPECT_EQ(b.compute_infer.count, 1000u);
}

TEST(InferenceStatisticsTest, JsonHasTritonsShape) {
  InferenceStatistics s;
  s.RecordExecution(2, 1, nanoseconds(1), nanoseconds(2), nanoseconds(3));
  NamedStatistics named{"m", "1", s.Read()};
  EXPECT_EQ(ModelStatisticsJson({named}),
            "{\"model_stats\":[{\"name\":\"m\",\"version\":\"1\",\"last_inference\":0,"
            "\"inference_count\":2,\"execution_count\":1,\"inference_stats\":{"
            "\"success\":{\"count\":0,\"ns\":0},\"fail\":{\"count\":0,\"ns\":0},"
            "\"queue\":{\"count\":0,\"ns\":0},\"compute_input\":{\"count\":1,\"ns\":1},"
            "\"compute_infer\":{\"count\":1,\"ns\":2},\"compute_output\":{\"count\":1,\"ns\":3},"
            "\"cache_hit\":{\"count\":0,\"ns\":0},\"cache_miss\":{\"count\":0,\"ns\":0}},"
            "\"batch_stats\":[{\"batch_size\":2,\"compute_input\":{\"count\":1,\"ns\":1},"
            "\"compute_infer\":{\"count\":1,\"ns\":2},\"compute_output\":{\"count\":1,\"ns\":3}}],"
            "\"memory_usage\":[]}]}");
  EXPECT_EQ(ModelStatisticsJson({}), "{\"model_stats\":[]}");
}

}  // namespace
}  // namespace packrat::metrics
