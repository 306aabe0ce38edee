#include "agent/http/control_gate.h"

#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

TEST(ControlGateTest, BearerMatchesOnlyTheExactToken) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cretX", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer S3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer ", "s3cret"));
}

TEST(ControlGateTest, AnOpenGateAdmitsEveryCallAndATokenOnlyItsBearer) {
  EXPECT_TRUE(ControlGate().Admit(std::nullopt).ok());
  EXPECT_TRUE(ControlGate().Admit("Bearer anything").ok());
  const ControlGate gate("s3cret");
  EXPECT_TRUE(gate.Admit("Bearer s3cret").ok());
  EXPECT_EQ(gate.Admit(std::nullopt).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(gate.Admit("Bearer s3cre").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(gate.Admit("Bearer s3cre").message().find("s3cret"), std::string::npos);
}

TEST(ControlGateTest, TheFileIsTrimmedAndMustHoldATokenThatOthersCannotRead) {
  testing::TempDir dir("packrat-token");
  const std::string path = dir.path() + "/token";
  std::ofstream(path) << "  abc123\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  StatusOr<ControlGate> gate = ControlGate::FromFile(path);
  ASSERT_TRUE(gate.ok()) << gate.status().ToString();
  EXPECT_TRUE(gate->Admit("Bearer abc123").ok());
  EXPECT_FALSE(gate->Admit("Bearer  abc123").ok());
  // Readable by every user: refused, and the token is not in the message.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  gate = ControlGate::FromFile(path);
  EXPECT_EQ(gate.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gate.status().message().find("abc"), std::string::npos);
  ASSERT_EQ(chmod(path.c_str(), 0440), 0);  // a Secret's defaultMode in the chart
  EXPECT_TRUE(ControlGate::FromFile(path).ok());
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  std::ofstream(path) << " \n";
  gate = ControlGate::FromFile(path);
  EXPECT_EQ(gate.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ControlGate::FromFile(dir.path() + "/missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace packrat
