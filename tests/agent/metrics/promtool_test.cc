// `promtool check metrics` (Debian package prometheus, installed by scripts/setup.sh) parses and
// lints our pages: the test fails, rather than skips, when promtool is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/metrics/agent_metrics.h"
#include "tests/agent/metrics/child_process.h"
#include "tests/agent/metrics/populated_metrics.h"

namespace packrat::metrics::testing {
namespace {

namespace fs = std::filesystem;

struct CheckResult {
  bool ran = false;
  int exit_code = -1;
  std::string output;
};

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/packrat_promtool_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `promtool check metrics` on `page` (given on stdin, as promtool wants it).
  CheckResult Check(const std::string& page) {
    const std::string path = dir_ + "/metrics.txt";
    std::ofstream(path) << page;
    CheckResult result;
    std::string error;
    auto child = ChildProcess::Start({"promtool", "check", "metrics"}, &error, path);
    if (child == nullptr) {
      result.output = error + " (install the Debian package prometheus: scripts/setup.sh)";
      return result;
    }
    const std::optional<int> status = child->Wait(std::chrono::seconds(30));
    result.output = child->Output();
    if (status && WIFEXITED(*status)) {
      result.ran = true;
      result.exit_code = WEXITSTATUS(*status);
    }
    return result;
  }

  std::string dir_;
};

TEST_F(PromtoolTest, AgentMetricsPageIsValidAndLintClean) {
  auto metrics = AgentMetrics::Create();
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  CallbackHandle queue = Populate(metrics->get());
  const std::string page = (*metrics)->Render();
  const CheckResult result = Check(page);
  ASSERT_TRUE(result.ran) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output << "\npage:\n" << page;
  EXPECT_EQ(result.output, "") << "page:\n" << page;
}

TEST_F(PromtoolTest, FreshAgentMetricsPageIsValid) {
  auto metrics = AgentMetrics::Create();
  ASSERT_TRUE(metrics.ok());
  (*metrics)->ForModel("demo");
  const CheckResult result = Check((*metrics)->Render());
  ASSERT_TRUE(result.ran) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// Controls: promtool really checks what we hand it.
TEST_F(PromtoolTest, RejectsAnUnparseablePage) {
  const CheckResult result = Check("packrat_x{model=\"unterminated} 1\n");
  ASSERT_TRUE(result.ran) << result.output;
  EXPECT_NE(result.exit_code, 0);
}

TEST_F(PromtoolTest, ReportsLintProblems) {
  const CheckResult result =
      Check("# HELP requests_count Requests.\n# TYPE requests_count counter\nrequests_count 1\n");
  ASSERT_TRUE(result.ran) << result.output;
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("_total"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace packrat::metrics::testing
