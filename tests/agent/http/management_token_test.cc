#include <fstream>

#include "agent/http/management_handler.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

TEST(ManagementTokenTest, BearerMatchesOnlyTheExactToken) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cretX", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer S3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer ", "s3cret"));
}

TEST(ManagementTokenTest, TheFileIsTrimmedAndMustHoldAToken) {
  testing::TempDir dir("packrat-token");
  const std::string path = dir.path() + "/token";
  std::ofstream(path) << "  abc123\n";
  StatusOr<std::string> token = ReadManagementToken(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "abc123");
  std::ofstream(path) << " \n";
  token = ReadManagementToken(path);
  EXPECT_EQ(token.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(token.status().message().find("abc"), std::string::npos);
  EXPECT_EQ(ReadManagementToken(dir.path() + "/missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace packrat
