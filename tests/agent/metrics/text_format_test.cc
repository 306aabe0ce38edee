#include "agent/metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace packrat::metrics {
namespace {

std::string Help(std::string_view text) {
  std::string out;
  AppendEscapedHelp(text, &out);
  return out;
}

std::string LabelValue(std::string_view text) {
  std::string out;
  AppendEscapedLabelValue(text, &out);
  return out;
}

std::string Double(double value) {
  std::string out;
  AppendDouble(value, &out);
  return out;
}

TEST(TextFormatTest, ValidatesMetricNames) {
  EXPECT_TRUE(IsValidMetricName("packrat_requests_total"));
  EXPECT_TRUE(IsValidMetricName("_x"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m"));
  EXPECT_TRUE(IsValidMetricName("a1"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("1a"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
  EXPECT_FALSE(IsValidMetricName("é"));
}

TEST(TextFormatTest, ValidatesLabelNames) {
  EXPECT_TRUE(IsValidLabelName("model"));
  EXPECT_TRUE(IsValidLabelName("_x1"));
  EXPECT_FALSE(IsValidLabelName(""));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName("a-b"));
}

TEST(TextFormatTest, EscapesHelpBackslashAndNewlineOnly) {
  EXPECT_EQ(Help("plain"), "plain");
  EXPECT_EQ(Help("a\\b\nc \"q\""), "a\\\\b\\nc \"q\"");
}

TEST(TextFormatTest, EscapesLabelValueBackslashQuoteAndNewline) {
  EXPECT_EQ(LabelValue("demo"), "demo");
  EXPECT_EQ(LabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(LabelValue("tab\tstays"), "tab\tstays");
}

TEST(TextFormatTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(LabelValue("r\xC3\xA9sum\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "r\xC3\xA9sum\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(LabelValue("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(LabelValue("\xC3"), "\xEF\xBF\xBD");                  // truncated sequence
  EXPECT_EQ(LabelValue("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(LabelValue("\xED\xA0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // UTF-16 surrogate
  EXPECT_EQ(Help("x\x80y"), "x\xEF\xBF\xBDy");
}

TEST(TextFormatTest, FormatsDoublesShortestAndSpecialValues) {
  EXPECT_EQ(Double(0), "0");
  EXPECT_EQ(Double(3), "3");
  EXPECT_EQ(Double(-2.5), "-2.5");
  EXPECT_EQ(Double(0.1), "0.1");
  EXPECT_EQ(Double(0.0005), "0.0005");
  EXPECT_EQ(Double(0.0001), "0.0001");
  EXPECT_EQ(Double(1e-05), "1e-05");
  EXPECT_EQ(Double(-3e-07), "-3e-07");
  EXPECT_EQ(Double(1e6), "1000000");
  EXPECT_EQ(Double(1e20), "100000000000000000000");
  EXPECT_EQ(Double(1e21), "1e+21");
  EXPECT_EQ(Double(1.5e300), "1.5e+300");
  EXPECT_EQ(Double(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(Double(123456789), "123456789");
  EXPECT_EQ(Double(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(Double(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(Double(std::nan("")), "NaN");
}

TEST(TextFormatTest, FormatsSampleLines) {
  std::string out;
  AppendSample("m", "", "", "", 1.5, &out);
  AppendSample("m", "_bucket", "", "le=\"1\"", uint64_t{7}, &out);
  AppendSample("m", "_sum", "a=\"x\"", "", 2.0, &out);
  AppendSample("m", "_bucket", "a=\"x\"", "le=\"+Inf\"", uint64_t{18446744073709551615u}, &out);
  EXPECT_EQ(out,
            "m 1.5\n"
            "m_bucket{le=\"1\"} 7\n"
            "m_sum{a=\"x\"} 2\n"
            "m_bucket{a=\"x\",le=\"+Inf\"} 18446744073709551615\n");
}

TEST(TextFormatTest, FormatsLabels) {
  EXPECT_EQ(FormatLabels({}, {}), "");
  EXPECT_EQ(FormatLabels({"model", "code"}, {"de\"mo", "200"}), "model=\"de\\\"mo\",code=\"200\"");
}

TEST(TextFormatTest, NamesTypes) {
  EXPECT_EQ(MetricTypeName(MetricType::kCounter), "counter");
  EXPECT_EQ(MetricTypeName(MetricType::kGauge), "gauge");
  EXPECT_EQ(MetricTypeName(MetricType::kHistogram), "histogram");
}

}  // namespace
}  // namespace packrat::metrics
