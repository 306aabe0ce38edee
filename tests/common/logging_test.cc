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

}  // namespace
}  // namespace packrat
