// `packrat plan`: in-process through RunPlanCommand, and end to end through the packrat binary.
// (Lives beside the optimizer tests because it is the optimizer's front end.)

#include "agent/cli/plan_command.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/command.h"

namespace packrat {
namespace {

const std::string kProfiles = std::string(PACKRAT_PROFILES_DIR) + "/";
const std::string kBert = kProfiles + "bert-base-xeon6142-16c.csv";
const std::string kResnet = kProfiles + "resnet50-xeon6142-16c.csv";

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result RunPlan(std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::ostringstream out, err;
  Result r;
  r.code = RunPlanCommand(views, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(PlanCommandTest, JsonMatchesTheDocumentedShape) {
  Result r = RunPlan({"--profile", kBert, "--threads", "16", "--batch", "64", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "{\"threads\":16,\"batch\":64,\"latency_ms\":114.056,\"fat_latency_ms\":172.477,"
            "\"expected_speedup\":1.51,\"instances\":[{\"count\":4,\"threads\":4,\"batch\":16}]}"
            "\n");
}

TEST(PlanCommandTest, MixedGroupsAndUnprofiledFatInstance) {
  Result r = RunPlan({"--profile", kBert, "--threads=14", "--batch=256", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "{\"threads\":14,\"batch\":256,\"latency_ms\":467.798,\"fat_latency_ms\":620.61,"
            "\"expected_speedup\":1.33,\"instances\":[{\"count\":1,\"threads\":8,\"batch\":128},"
            "{\"count\":2,\"threads\":3,\"batch\":64}]}\n");

  r = RunPlan({"--profile", kResnet, "--threads", "32", "--batch", "4", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\"fat_latency_ms\":null,\"expected_speedup\":null"), std::string::npos)
      << r.out;
}

TEST(PlanCommandTest, OneLinePerBatchInTheOrderGiven) {
  Result r = RunPlan({"--profile", kResnet, "--batch", "64", "--batch", "1,8", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  // --threads defaults to the profile's 16.
  EXPECT_TRUE(lines[0].starts_with("{\"threads\":16,\"batch\":64,")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("{\"threads\":16,\"batch\":1,")) << lines[1];
  EXPECT_TRUE(lines[2].starts_with("{\"threads\":16,\"batch\":8,")) << lines[2];
}

TEST(PlanCommandTest, TableOutput) {
  Result r = RunPlan({"--profile", kBert, "--threads", "16", "--batch", "8,1024"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[0], "profile: " + kBert + " (176 points, threads 1..16, batch sizes 1..1024)");
  EXPECT_EQ(lines[3],
            "   B  config     instances  threads_used  latency_ms  fat_latency_ms  speedup");
  EXPECT_EQ(lines[4],
            "   8  <2,8,4>            2            16      33.367          42.873    1.28x");
  EXPECT_EQ(lines[5],
            "1024  <8,2,128>          8            16    1179.567        2699.143    2.29x");
}

TEST(PlanCommandTest, HelpGoesToStdout) {
  Result r = RunPlan({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("Usage: packrat plan [OPTIONS]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--profile FILE REQUIRED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--threads T"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("example: packrat plan --profile"), std::string::npos) << r.out;
}

TEST(PlanCommandTest, UsageErrorsExitWithTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--profile", kBert, "--batch", "8", "--frobnicate"},
       "The following argument was not expected: --frobnicate"},
      {{"--profile", kBert, "--batch"}, "--batch: 1 required B:INT>=1 missing"},
      {{"--batch", "8"}, "--profile is required"},
      {{"--profile", kBert}, "--batch is required"},
      {{"--profile", kBert, "--batch", "eight"}, "--batch: 'eight' is not an integer"},
      {{"--profile", kBert, "--batch", "0"}, "--batch: must be >= 1, got 0"},
      {{"--profile", kBert, "--batch", "8", "--threads", "-1"}, "--threads: must be >= 1, got -1"},
      {{"--profile", kBert, "--batch", "8", "extra"},
       "The following argument was not expected: extra"},
  };
  for (const auto& [args, message] : cases) {
    Result r = RunPlan(args);
    EXPECT_EQ(r.code, kExitUsage) << message;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "error: " + message + "\nrun 'packrat plan --help' for usage\n") << message;
  }
}

TEST(PlanCommandTest, LoadAndSolveErrorsExitWithOne) {
  Result r = RunPlan({"--profile", "/nonexistent.csv", "--batch", "8"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_TRUE(r.err.starts_with("error: cannot open profile '/nonexistent.csv'")) << r.err;

  // Solved before printed: nothing on stdout when one batch fails.
  // Two threads run at most two instances of at most 1024 rows.
  r = RunPlan({"--profile", kBert, "--threads", "2", "--batch", "8", "--batch", "4096"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(r.err.starts_with("error: no plan for threads=2 and batch=4096")) << r.err;
}

// Runs the packrat binary with `args` through the shell; stderr is folded into `out`.
Result RunBinary(const std::string& args) {
  Result r;
  std::string command = std::string(PACKRAT_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) r.out.append(buf, n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(PackratBinaryTest, PlanJsonParses) {
  Result r = RunBinary("plan --profile " + kResnet + " --threads 16 --batch 1,64,1024 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  simdjson::dom::parser parser;
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS);
    for (const char* key :
         {"threads", "batch", "latency_ms", "fat_latency_ms", "expected_speedup", "instances"}) {
      EXPECT_EQ(doc[key].error(), simdjson::SUCCESS) << key;
    }
    int64_t threads = 0, batch = 0;
    ASSERT_EQ(doc["threads"].get(threads), simdjson::SUCCESS);
    ASSERT_EQ(doc["batch"].get(batch), simdjson::SUCCESS);
    EXPECT_EQ(threads, 16);
    double latency = 0, fat = 0, speedup = 0;
    ASSERT_EQ(doc["latency_ms"].get(latency), simdjson::SUCCESS);
    ASSERT_EQ(doc["fat_latency_ms"].get(fat), simdjson::SUCCESS);
    ASSERT_EQ(doc["expected_speedup"].get(speedup), simdjson::SUCCESS);
    EXPECT_LE(latency, fat);
    EXPECT_GE(speedup, 1.0);
    simdjson::dom::array instances;
    ASSERT_EQ(doc["instances"].get(instances), simdjson::SUCCESS);
    int64_t rows = 0, used = 0;
    for (simdjson::dom::element group : instances) {
      int64_t count = 0, t = 0, b = 0;
      ASSERT_EQ(group["count"].get(count), simdjson::SUCCESS);
      ASSERT_EQ(group["threads"].get(t), simdjson::SUCCESS);
      ASSERT_EQ(group["batch"].get(b), simdjson::SUCCESS);
      rows += count * b;
      used += count * t;
    }
    EXPECT_EQ(rows, batch);
    EXPECT_LE(used, 16);
  }
}

TEST(PackratBinaryTest, HelpVersionAndErrors) {
  Result r = RunBinary("");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(r.out.starts_with("usage: packrat COMMAND")) << r.out;
  EXPECT_NE(r.out.find("  plan "), std::string::npos);

  r = RunBinary("help plan");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Usage: packrat plan [OPTIONS]"), std::string::npos) << r.out;

  r = RunBinary("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(r.out.starts_with("packrat ")) << r.out;

  r = RunBinary("version");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(r.out.starts_with("packrat ")) << r.out;

  r = RunBinary("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.starts_with("error: unknown command 'frobnicate'")) << r.out;

  r = RunBinary("plan --profile " + kResnet + " --batch 8 --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.starts_with("error: The following argument was not expected: --bogus")) << r.out;

  r = RunBinary("plan --profile /nonexistent.csv --batch 8");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.starts_with("error: cannot open profile")) << r.out;
}

}  // namespace
}  // namespace packrat
