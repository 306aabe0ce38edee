// `packrat capacity` in-process: the throughput each peer's plan sustains at a p99 target,
// simulated on the shared 16-core profiles.

#include "agent/cli/capacity_command.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/cli/command.h"

namespace packrat {
namespace {

const std::string kProfiles = std::string(PACKRAT_PROFILES_DIR) + "/";
const std::string kResnet = kProfiles + "resnet50-xeon6142-16c.csv";

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result RunCapacity(std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::ostringstream out, err;
  Result r;
  r.code = RunCapacityCommand(views, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

struct Peer {
  std::string config;
  double rows_per_s = -1;  // -1: null
};

// One JSON line per batch size: batch -> peer -> result.
std::map<int64_t, std::map<std::string, Peer>> Parse(const std::string& out) {
  std::map<int64_t, std::map<std::string, Peer>> rows;
  simdjson::dom::parser parser;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element row = parser.parse(line);
    auto& peers = rows[int64_t(row["batch"])];
    for (simdjson::dom::element peer : simdjson::dom::array(row["peers"])) {
      Peer p;
      p.config = std::string(std::string_view(peer["config"]));
      if (!peer["rows_per_s"].is_null()) p.rows_per_s = double(peer["rows_per_s"]);
      peers[std::string(std::string_view(peer["peer"]))] = p;
    }
  }
  return rows;
}

TEST(CapacityCommandTest, ThePeersPlansAtEachBatchSize) {
  Result r = RunCapacity({"--profile", kResnet, "--batch", "8,64", "--p99-ms", "1000", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.out.starts_with("{\"threads\":16,\"batch\":8,\"p99_target_ms\":1000,\"peers\":"))
      << r.out;
  auto rows = Parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[8]["fat"].config, "<1,16,8>");
  EXPECT_EQ(rows[8]["per_core"].config, "<8,1,1>");  // bench/run's: a row per instance
  EXPECT_EQ(rows[8]["packrat"].config, "<8,2,1>");   // the optimizer's plan
  EXPECT_EQ(rows[64]["per_core"].config, "<16,1,4>");
  // Thin instances serve more at the target than one fat one (the profile's L[16,8] is 49.6
  // ms for 8 rows, L[2,1] 32.0 ms for one row on each of eight instances).
  EXPECT_GT(rows[8]["packrat"].rows_per_s, 1.3 * rows[8]["fat"].rows_per_s);
  // No plan is simulated past its capacity: 8 rows per 49.6 ms.
  EXPECT_LE(rows[8]["fat"].rows_per_s, 8 * 1000 / 49.631 + 0.01);
}

TEST(CapacityCommandTest, ATighterTargetServesLess) {
  Result lax = RunCapacity({"--profile", kResnet, "--batch", "8", "--p99-ms", "1000", "--json"});
  Result tight = RunCapacity({"--profile", kResnet, "--batch", "8", "--p99-ms", "60", "--json"});
  ASSERT_EQ(lax.code, kExitOk) << lax.err;
  ASSERT_EQ(tight.code, kExitOk) << tight.err;
  for (const char* peer : {"fat", "per_core", "packrat"}) {
    EXPECT_LT(Parse(tight.out)[8][peer].rows_per_s, Parse(lax.out)[8][peer].rows_per_s) << peer;
  }
}

TEST(CapacityCommandTest, APlanTheProfileCannotTimeHasNoRate) {
  // The profile has no 32-thread instance: the fat plan for T = 32 cannot be simulated.
  Result r = RunCapacity(
      {"--profile", kResnet, "--threads", "32", "--batch", "4", "--p99-ms", "1000", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("{\"peer\":\"fat\",\"config\":\"<1,32,4>\",\"batch_ms\":null,"
                       "\"rows_per_s\":null}"),
            std::string::npos)
      << r.out;
  EXPECT_GT(Parse(r.out)[4]["packrat"].rows_per_s, 0);
}

TEST(CapacityCommandTest, ABatchSizeNoPlanCoversHasNoOptimizerRow) {
  // A sparse profile (as `bench/virtual --real` measures): no plan of its points for B = 8 on
  // two threads, one for B = 4.
  const std::string path = ::testing::TempDir() + "capacity_sparse.csv";
  std::ofstream(path) << "threads,batch,latency_ms\n1,1,10\n1,2,18\n2,1,6\n2,2,10\n2,4,19\n";
  Result r = RunCapacity({"--profile", path, "--batch", "4,8", "--p99-ms", "1000", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto rows = Parse(r.out);
  EXPECT_GT(rows[4]["packrat"].rows_per_s, 0);
  EXPECT_EQ(rows[8]["packrat"].config, "");
  EXPECT_EQ(rows[8]["packrat"].rows_per_s, -1);
  EXPECT_GT(rows[8]["per_core"].rows_per_s, 0);  // <2,1,4>, b = 4 timed proportionally to b = 2
  // No batch size with a plan: the optimizer's reason.
  r = RunCapacity({"--profile", path, "--batch", "8", "--p99-ms", "1000", "--json"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("no plan for threads=2 and batch=8"), std::string::npos) << r.err;
  std::remove(path.c_str());
}

TEST(CapacityCommandTest, UsageErrorsExitWithTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--profile", kResnet, "--batch", "8"}, "--p99-ms is required"},
      {{"--batch", "8", "--p99-ms", "100"}, "--profile is required"},
      {{"--profile", kResnet, "--batch", "8", "--p99-ms", "0"}, "--p99-ms: must be >= 1, got 0"},
      {{"--profile", kResnet, "--batch", "8", "--p99-ms", "100", "--requests", "10"},
       "--requests: must be >= 100, got 10"},
  };
  for (const auto& [args, message] : cases) {
    Result r = RunCapacity(args);
    EXPECT_EQ(r.code, kExitUsage) << message;
    EXPECT_EQ(r.err, "error: " + message + "\nrun 'packrat capacity --help' for usage\n");
  }
  Result r = RunCapacity({"--profile", "/nonexistent.csv", "--batch", "8", "--p99-ms", "100"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_TRUE(r.err.starts_with("error: cannot open profile")) << r.err;
}

}  // namespace
}  // namespace packrat
