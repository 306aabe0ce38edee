// The logging extension's settings: read, parsed from a POST body, and applied all or nothing.
#include "agent/kserve/log_settings.h"

#include <string>

#include "common/logging.h"
#include "gtest/gtest.h"

namespace packrat {
namespace {

class LogSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = CurrentLogLevels();
    SetLogFormat(LogFormat::kText);
  }
  void TearDown() override { SetLogLevels(saved_); }

 private:
  LogLevels saved_;
};

TEST_F(LogSettingsTest, ReportsTritonsSettingsInTheirOrder) {
  SetLogLevels(LogLevels{});
  EXPECT_EQ(LogSettingsJson(CurrentLogSettings()),
            "{\"log_file\":\"\",\"log_info\":true,\"log_warning\":true,\"log_error\":true,"
            "\"log_verbose_level\":0,\"log_format\":\"text\"}");
}

TEST_F(LogSettingsTest, AChangeTurnsLevelsOnAndOff) {
  SetLogLevels(LogLevels{});
  const StatusOr<LogSettings> change =
      ParseLogSettingsJson(R"({"log_verbose_level": 2, "log_info": false})");
  ASSERT_TRUE(change.ok()) << change.status().message();
  ASSERT_TRUE(ApplyLogSettings(*change).ok());
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarning));
  EXPECT_NE(LogSettingsJson(CurrentLogSettings()).find("\"log_verbose_level\":1"),
            std::string::npos);
  // The settings in effect are accepted as they are.
  EXPECT_TRUE(ApplyLogSettings(CurrentLogSettings()).ok());
}

TEST_F(LogSettingsTest, AnyBadSettingChangesNothing) {
  SetLogLevels(LogLevels{});
  for (const char* body : {
           R"({"log_info": false, "log_file": "/tmp/agent.log"})",
           R"({"log_info": false, "log_format": "ISO8601"})",
           R"({"log_info": false, "log_warning": "no"})",
           R"({"log_info": false, "log_verbose_level": true})",
           R"({"log_info": false, "log_colour": true})",
       }) {
    SCOPED_TRACE(body);
    const StatusOr<LogSettings> change = ParseLogSettingsJson(body);
    ASSERT_TRUE(change.ok());
    const Status applied = ApplyLogSettings(*change);
    EXPECT_EQ(applied.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
  }
  for (const char* body : {"[]", "{", R"({"log_verbose_level": -1})", R"({"log_info": null})"}) {
    SCOPED_TRACE(body);
    EXPECT_EQ(ParseLogSettingsJson(body).status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace packrat
