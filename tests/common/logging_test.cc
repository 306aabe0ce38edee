// The log line formats, as written to stderr.
#include "common/logging.h"

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>

#include "gtest/gtest.h"

namespace packrat {
namespace {

// What one PACKRAT_LOG statement in `format` writes to stderr.
template <typename Fn>
std::string Captured(LogFormat format, Fn log) {
  SetLogFormat(format);
  std::FILE* file = std::tmpfile();
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(file), STDERR_FILENO);
  log();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::rewind(file);
  std::string out;
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), file)) > 0;) out.append(buf, n);
  std::fclose(file);
  SetLogFormat(LogFormat::kText);
  return out;
}

TEST(LoggingTest, TextLinesKeepTheirShape) {
  SetLogComponent("agent");
  const std::string line =
      Captured(LogFormat::kText, [] { PACKRAT_LOG(WARNING) << "model 'm': " << 3; });
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(W \d\d:\d\d:\d\d\.\d{6} agent logging_test\.cc:\d+\] model 'm': 3\n)")))
      << line;
}

TEST(LoggingTest, JsonLinesCarryAnRfc3339DateAndEscapeTheMessage) {
  SetLogComponent("agent");
  const std::string line = Captured(
      LogFormat::kJson, [] { PACKRAT_LOG(ERROR) << "bad \"quote\"\tand\\ a control \x01 char"; });
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","level":"error",)"
                       R"("component":"agent","source":"logging_test\.cc:\d+",)"
                       R"("message":"bad \\"quote\\"\\tand\\\\ a control \\u0001 char"\}\n)")))
      << line;
  EXPECT_STREQ(std::getenv("PACKRAT_LOG_FORMAT"), "text");  // children follow the last setting
}

// A line written inside a LogScope names its model and request; scopes nest, and an inner one
// that names no request keeps the outer one's; once they end, lines name nothing again.
TEST(LoggingTest, LinesInALogScopeNameTheirModelAndRequest) {
  SetLogComponent("agent");
  const std::string json = Captured(LogFormat::kJson, [] {
    const LogScope request("demo", "r-42");
    {
      const LogScope inner("other");
      PACKRAT_LOG(INFO) << "inner";
    }
    PACKRAT_LOG(INFO) << "outer";
  });
  EXPECT_NE(json.find(R"("model":"other","request_id":"r-42","message":"inner")"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("model":"demo","request_id":"r-42","message":"outer")"), std::string::npos)
      << json;
  const std::string text = Captured(LogFormat::kText, [] {
    {
      const LogScope scope("demo");
      PACKRAT_LOG(INFO) << "about demo";
    }
    PACKRAT_LOG(INFO) << "about nothing";
  });
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\] model=demo about demo
)"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\d\] about nothing
)"))) << text;
}

}  // namespace
}  // namespace packrat
