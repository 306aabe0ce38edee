#include "agent/metrics/metrics_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

namespace packrat::metrics {
namespace {

// prefix + number (appending, which sidesteps a GCC 12 -Wrestrict false positive on
// `"t" + std::to_string(t)`).
std::string Numbered(const char* prefix, int n) {
  std::string name = prefix;
  name += std::to_string(n);
  return name;
}

class MetricsRegistryTest : public ::testing::Test {
 protected:
  template <typename T>
  static T* Ok(StatusOr<T*> result) {
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : nullptr;
  }

  MetricsRegistry registry_;
};

TEST_F(MetricsRegistryTest, EmptyRegistryRendersNothing) { EXPECT_EQ(registry_.Render(), ""); }

TEST_F(MetricsRegistryTest, RendersCounterSeriesSortedByLabelValues) {
  auto* requests = Ok(registry_.AddCounter(
      {"packrat_test_requests_total", "Requests answered.", {"model", "code"}}));
  Counter& ok = requests->WithLabelValues({"demo", "200"});
  ok.Increment();
  ok.Increment();
  ok.Increment();
  requests->WithLabelValues({"demo", "503"}).Increment(2.5);
  requests->WithLabelValues({"alpha", "200"}).Increment();
  EXPECT_EQ(registry_.Render(),
            "# HELP packrat_test_requests_total Requests answered.\n"
            "# TYPE packrat_test_requests_total counter\n"
            "packrat_test_requests_total{model=\"alpha\",code=\"200\"} 1\n"
            "packrat_test_requests_total{model=\"demo\",code=\"200\"} 3\n"
            "packrat_test_requests_total{model=\"demo\",code=\"503\"} 2.5\n");
}

TEST_F(MetricsRegistryTest, SameLabelValuesReturnTheSameSeries) {
  auto* family = Ok(registry_.AddCounter({"x_total", "X.", {"a"}}));
  EXPECT_EQ(&family->WithLabelValues({"1"}), &family->WithLabelValues({"1"}));
  EXPECT_NE(&family->WithLabelValues({"1"}), &family->WithLabelValues({"2"}));
}

TEST_F(MetricsRegistryTest, CounterIgnoresNegativeAndNanIncrements) {
  auto* family = Ok(registry_.AddCounter({"x_total", "X.", {}}));
  Counter& c = family->WithLabelValues({});
  c.Increment(4);
  c.Increment(-1);
  c.Increment(std::nan(""));
  EXPECT_EQ(c.Value(), 4);
}

TEST_F(MetricsRegistryTest, UnlabeledFamilyIsExportedAsZeroBeforeAnyUpdate) {
  Ok(registry_.AddCounter({"restarts_total", "Restarts.", {}}));
  Ok(registry_.AddGauge({"labeled", "Nothing yet.", {"model"}}));
  EXPECT_EQ(registry_.Render(),
            "# HELP restarts_total Restarts.\n"
            "# TYPE restarts_total counter\n"
            "restarts_total 0\n");
}

TEST_F(MetricsRegistryTest, RendersGaugeUpdatesAndSpecialValues) {
  auto* gauge = Ok(registry_.AddGauge({"g", "A gauge.", {"k"}}));
  Gauge& a = gauge->WithLabelValues({"a"});
  a.Set(10);
  a.Increment(2.5);
  a.Decrement();
  a.Decrement(20);
  gauge->WithLabelValues({"b"}).Set(std::numeric_limits<double>::infinity());
  gauge->WithLabelValues({"c"}).Set(std::nan(""));
  EXPECT_EQ(registry_.Render(),
            "# HELP g A gauge.\n"
            "# TYPE g gauge\n"
            "g{k=\"a\"} -8.5\n"
            "g{k=\"b\"} +Inf\n"
            "g{k=\"c\"} NaN\n");
}

TEST_F(MetricsRegistryTest, RendersHistogramWithCumulativeBucketsSumAndCount) {
  auto* family = Ok(registry_.AddHistogram(
      {"packrat_test_duration_seconds", "Durations.", {"model"}}, {0.25, 0.5, 1}));
  Histogram& h = family->WithLabelValues({"demo"});
  h.Observe(0.125);
  h.Observe(0.25);  // a bound is inclusive: le="0.25"
  h.Observe(0.5);
  h.Observe(2);
  h.Observe(std::nan(""));  // ignored
  EXPECT_EQ(registry_.Render(),
            "# HELP packrat_test_duration_seconds Durations.\n"
            "# TYPE packrat_test_duration_seconds histogram\n"
            "packrat_test_duration_seconds_bucket{model=\"demo\",le=\"0.25\"} 2\n"
            "packrat_test_duration_seconds_bucket{model=\"demo\",le=\"0.5\"} 3\n"
            "packrat_test_duration_seconds_bucket{model=\"demo\",le=\"1\"} 3\n"
            "packrat_test_duration_seconds_bucket{model=\"demo\",le=\"+Inf\"} 4\n"
            "packrat_test_duration_seconds_sum{model=\"demo\"} 2.875\n"
            "packrat_test_duration_seconds_count{model=\"demo\"} 4\n");
}

TEST_F(MetricsRegistryTest, UnlabeledHistogramWithoutBoundsHasOnlyInfBucket) {
  auto* family = Ok(registry_.AddHistogram({"h_rows", "Rows.", {}}, {}));
  family->WithLabelValues({}).Observe(-3);
  EXPECT_EQ(registry_.Render(),
            "# HELP h_rows Rows.\n"
            "# TYPE h_rows histogram\n"
            "h_rows_bucket{le=\"+Inf\"} 1\n"
            "h_rows_sum -3\n"
            "h_rows_count 1\n");
}

TEST_F(MetricsRegistryTest, HistogramSnapshotIsCumulative) {
  auto* family = Ok(registry_.AddHistogram({"h", "H.", {}}, LinearBuckets(1, 1, 3)));
  Histogram& h = family->WithLabelValues({});
  for (double v : {0.5, 1.5, 1.5, 2.5, 9.0}) h.Observe(v);
  const Histogram::Snapshot s = h.Collect();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{1, 3, 4, 5}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 15.0);
}

TEST_F(MetricsRegistryTest, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(0.001, 2, 4), (BucketBounds{0.001, 0.002, 0.004, 0.008}));
  EXPECT_EQ(LinearBuckets(0, 5, 3), (BucketBounds{0, 5, 10}));
}

TEST_F(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  auto* family = Ok(registry_.AddGauge(
      {"escaped", "Help with \\ backslash,\nnewline and \"quotes\".", {"path"}}));
  family->WithLabelValues({"C:\\dir\n\"x\""}).Set(1);
  EXPECT_EQ(registry_.Render(),
            "# HELP escaped Help with \\\\ backslash,\\nnewline and \"quotes\".\n"
            "# TYPE escaped gauge\n"
            "escaped{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST_F(MetricsRegistryTest, RendersFamiliesInRegistrationOrder) {
  Ok(registry_.AddGauge({"zz", "Z.", {}}));
  Ok(registry_.AddGauge({"aa", "A.", {}}));
  EXPECT_EQ(registry_.Render(),
            "# HELP zz Z.\n# TYPE zz gauge\nzz 0\n"
            "# HELP aa A.\n# TYPE aa gauge\naa 0\n");
}

TEST_F(MetricsRegistryTest, RemovedSeriesIsHiddenAndComesBackWithItsValue) {
  auto* family = Ok(registry_.AddGauge({"instances", "I.", {"model", "state"}}));
  Gauge& ready = family->WithLabelValues({"demo", "ready"});
  ready.Set(3);
  family->WithLabelValues({"demo", "warming"}).Set(1);
  family->WithLabelValues({"other", "ready"}).Set(2);
  family->Remove({"demo", "ready"});
  family->Remove({"never", "created"});  // no-op
  EXPECT_EQ(registry_.Render(),
            "# HELP instances I.\n# TYPE instances gauge\n"
            "instances{model=\"demo\",state=\"warming\"} 1\n"
            "instances{model=\"other\",state=\"ready\"} 2\n");
  ready.Set(4);  // the reference stays valid while hidden
  family->RemoveIf([](const LabelValues& v) { return v[0] == "demo"; });
  EXPECT_EQ(registry_.Render(),
            "# HELP instances I.\n# TYPE instances gauge\n"
            "instances{model=\"other\",state=\"ready\"} 2\n");
  EXPECT_EQ(&family->WithLabelValues({"demo", "ready"}), &ready);
  EXPECT_EQ(registry_.Render(),
            "# HELP instances I.\n# TYPE instances gauge\n"
            "instances{model=\"demo\",state=\"ready\"} 4\n"
            "instances{model=\"other\",state=\"ready\"} 2\n");
}

TEST_F(MetricsRegistryTest, CallbackGaugeIsEvaluatedAtScrapeTime) {
  auto* family = Ok(registry_.AddCallbackGauge({"queue_rows", "Queued rows.", {"model"}}));
  double rows = 5;
  CallbackHandle a = family->Bind({"a"}, [&rows] { return rows; });
  CallbackHandle b = family->Bind({"b"}, [] { return std::optional<double>(); });  // left out
  EXPECT_EQ(registry_.Render(),
            "# HELP queue_rows Queued rows.\n# TYPE queue_rows gauge\nqueue_rows{model=\"a\"} 5\n");
  rows = 7;
  EXPECT_EQ(registry_.Render(),
            "# HELP queue_rows Queued rows.\n# TYPE queue_rows gauge\nqueue_rows{model=\"a\"} 7\n");
  a.Reset();
  EXPECT_FALSE(a.bound());
  EXPECT_EQ(registry_.Render(), "");  // b has no value: no header either
}

TEST_F(MetricsRegistryTest, CallbackCounterHasCounterType) {
  auto* family = Ok(registry_.AddCallbackCounter({"cpu_seconds_total", "CPU.", {}}));
  CallbackHandle h = family->Bind({}, [] { return 1.25; });
  EXPECT_EQ(registry_.Render(),
            "# HELP cpu_seconds_total CPU.\n# TYPE cpu_seconds_total counter\n"
            "cpu_seconds_total 1.25\n");
}

TEST_F(MetricsRegistryTest, CallbackThatThrowsIsLeftOut) {
  auto* family = Ok(registry_.AddCallbackGauge({"g", "G.", {"k"}}));
  CallbackHandle bad =
      family->Bind({"bad"}, []() -> std::optional<double> { throw std::runtime_error("x"); });
  CallbackHandle good = family->Bind({"good"}, [] { return 1; });
  EXPECT_EQ(registry_.Render(), "# HELP g G.\n# TYPE g gauge\ng{k=\"good\"} 1\n");
}

TEST_F(MetricsRegistryTest, HandleLifetimeControlsTheSeries) {
  auto* family = Ok(registry_.AddCallbackGauge({"g", "G.", {"k"}}));
  {
    CallbackHandle scoped = family->Bind({"x"}, [] { return 1; });
    EXPECT_NE(registry_.Render(), "");
  }
  EXPECT_EQ(registry_.Render(), "");

  // Moving keeps the binding; the moved-from handle unbinds nothing.
  CallbackHandle first = family->Bind({"x"}, [] { return 2; });
  CallbackHandle moved = std::move(first);
  first.Reset();
  EXPECT_EQ(registry_.Render(), "# HELP g G.\n# TYPE g gauge\ng{k=\"x\"} 2\n");

  // Rebinding replaces; the replaced handle's destruction leaves the new binding alone.
  CallbackHandle replacement = family->Bind({"x"}, [] { return 3; });
  moved.Reset();
  EXPECT_EQ(registry_.Render(), "# HELP g G.\n# TYPE g gauge\ng{k=\"x\"} 3\n");
  replacement = CallbackHandle();
  EXPECT_EQ(registry_.Render(), "");
}

TEST_F(MetricsRegistryTest, RejectsInvalidNames) {
  EXPECT_EQ(registry_.AddCounter({"1abc", "X.", {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.AddCounter({"a-b", "X.", {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.AddGauge({"g", "X.", {"__reserved"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.AddGauge({"g", "X.", {"a", "a"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.AddHistogram({"h", "X.", {"le"}}, {1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry_.AddGauge({"g", "X.", {"le"}}).ok());  // only histograms reserve le
}

TEST_F(MetricsRegistryTest, RejectsInvalidBuckets) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const BucketBounds& bad :
       {BucketBounds{1, 1}, BucketBounds{2, 1}, BucketBounds{inf}, BucketBounds{std::nan("")}}) {
    EXPECT_EQ(registry_.AddHistogram({"h", "X.", {}}, bad).status().code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(registry_.AddHistogram({"h", "X.", {}}, {-1, 0, 1}).ok());
}

TEST_F(MetricsRegistryTest, RejectsCollidingSampleNames) {
  ASSERT_TRUE(registry_.AddHistogram({"latency_seconds", "X.", {}}, {1}).ok());
  EXPECT_EQ(registry_.AddGauge({"latency_seconds", "X.", {}}).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(registry_.AddCounter({"latency_seconds_count", "X.", {}}).status().code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry_.AddGauge({"depth_sum", "X.", {}}).ok());
  EXPECT_EQ(registry_.AddHistogram({"depth", "X.", {}}, {1}).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(registry_.AddCallbackGauge({"depth_sum", "X.", {}}).status().code(),
            StatusCode::kAlreadyExists);
}

TEST_F(MetricsRegistryTest, WrongNumberOfLabelValuesAborts) {
  auto* family = Ok(registry_.AddCounter({"x_total", "X.", {"a", "b"}}));
  EXPECT_DEATH(family->WithLabelValues({"only-one"}), "has 2 labels but was given 1 values");
  auto* callbacks = Ok(registry_.AddCallbackGauge({"cb", "X.", {"a"}}));
  EXPECT_DEATH((void)callbacks->Bind({}, [] { return 1; }), "has 1 labels but was given 0");
}

TEST_F(MetricsRegistryTest, ConcurrentUpdatesFromManyThreadsAllCount) {
  auto* counters = Ok(registry_.AddCounter({"c_total", "C.", {"k"}}));
  auto* gauges = Ok(registry_.AddGauge({"g", "G.", {}}));
  auto* histograms = Ok(registry_.AddHistogram({"h", "H.", {}}, {1, 2}));
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  // A scraper renders concurrently with the updates (meaningful under TSan).
  std::thread scraper([&] {
    while (!stop.load()) (void)registry_.Render();
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter& shared = counters->WithLabelValues({"shared"});
      Counter& own = counters->WithLabelValues({Numbered("t", t)});
      Gauge& gauge = gauges->WithLabelValues({});
      Histogram& histogram = histograms->WithLabelValues({});
      for (int i = 0; i < kIterations; ++i) {
        shared.Increment();
        own.Increment(0.5);
        gauge.Increment();
        gauge.Decrement();
        histogram.Observe(i % 3);  // 0, 1 -> le=1; 2 -> le=2
      }
    });
  }
  for (auto& thread : threads) thread.join();
  stop.store(true);
  scraper.join();

  EXPECT_EQ(counters->WithLabelValues({"shared"}).Value(), kThreads * kIterations);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(counters->WithLabelValues({Numbered("t", t)}).Value(), kIterations * 0.5);
  }
  EXPECT_EQ(gauges->WithLabelValues({}).Value(), 0);
  const Histogram::Snapshot s = histograms->WithLabelValues({}).Collect();
  const uint64_t total = uint64_t{kThreads} * kIterations;
  EXPECT_EQ(s.count, total);
  uint64_t twos = 0;
  double sum = 0;
  for (int i = 0; i < kIterations; ++i) {
    twos += (i % 3 == 2);
    sum += i % 3;
  }
  EXPECT_EQ(s.cumulative[0], total - twos * kThreads);
  EXPECT_EQ(s.cumulative[1], total);
  EXPECT_EQ(s.sum, sum * kThreads);  // integers: exact in a double
}

TEST_F(MetricsRegistryTest, FamiliesCanBeAddedWhileRendering) {
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) (void)registry_.Render();
  });
  for (int i = 0; i < 200; ++i) {
    auto* family = Ok(registry_.AddGauge({Numbered("g", i), "G.", {}}));
    family->WithLabelValues({}).Set(i);
  }
  stop.store(true);
  scraper.join();
  EXPECT_NE(registry_.Render().find("g199 199\n"), std::string::npos);
}

}  // namespace
}  // namespace packrat::metrics
