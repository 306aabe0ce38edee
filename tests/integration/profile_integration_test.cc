// profile -> plan -> serve: `packrat profile` with real runtimes, and an agent whose model has
// `instances: auto` (profiles at start-up, reuses the stored profile on the next start).
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/planning/optimizer.h"
#include "agent/planning/profile.h"
#include "gtest/gtest.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

const std::string kModels = PACKRAT_MODELS_DIR;

std::string CnnConfig(const std::string& profile_dir) {
  return "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
         "profile_dir: " +
         profile_dir +
         "}\n"
         "models:\n"
         "  - name: cnn\n"
         "    path: " +
         kModels +
         "/small_cnn.pt\n"
         "    inputs: [{name: image, datatype: FP32, shape: [-1, 3, 32, 32]}]\n"
         "    outputs: [{name: logits, datatype: FP32, shape: [-1, 10]}]\n"
         "    batching: {max_batch: 4, max_delay_us: 1000}\n"
         "    instances: auto\n";
}

using testing::TempDir;

// Runs a command, returning its exit status and stdout+stderr.
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(ProfileIntegrationTest, ProfileCommandWritesAResumableProfile) {
  TempDir dir;
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << CnnConfig(dir.path() + "/store");
  const std::string out = dir.path() + "/cnn.csv";
  const std::string base = std::string(PACKRAT_CLI_PATH) + " profile --config " + config +
                           " --model cnn --out " + out + " --threads 1 --max-seconds-per-point 1";

  auto [rc, log] = RunCommand(base + " --batches 1,2");
  ASSERT_EQ(rc, 0) << log;
  auto profile = Profile::LoadCsv(out);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->size(), 2u);
  const auto first = *profile->Find(1, 2);
  EXPECT_GT(first.latency_ms, 0);
  EXPECT_GE(first.iterations.value_or(0), 5);
  const std::string key_text = FirstLine(out + ".key");
  EXPECT_NE(key_text.find("cores="), std::string::npos);
  EXPECT_NE(key_text.find("libtorch="), std::string::npos);

  // Resuming measures only the new point and keeps the old ones as they were.
  std::tie(rc, log) = RunCommand(base + " --batches 1,2,4");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("resuming"), std::string::npos) << log;
  EXPECT_NE(log.find("3/3 <t=1,b=4>"), std::string::npos) << log;  // reused points count as done
  EXPECT_EQ(log.find("<t=1,b=2>"), std::string::npos) << log;
  profile = Profile::LoadCsv(out);
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ(profile->size(), 3u);
  EXPECT_EQ(*profile->Find(1, 2), first);

  // The profile plans.
  std::tie(rc, log) = RunCommand(std::string(PACKRAT_CLI_PATH) + " plan --json --profile " + out +
                                 " --threads 1 --batch 4");
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("\"instances\":[{\"count\":1,\"threads\":1,\"batch\":4}]"), std::string::npos)
      << log;
}

// By default a thin instance is timed next to busy neighbours on the other cores (the load its
// plan puts on the machine); --alone times it by itself. The two are different profiles: one is
// never resumed as the other.
TEST(ProfileIntegrationTest, ProfileCommandTimesNextToNeighboursOrAlone) {
  TempDir dir;
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << CnnConfig(dir.path() + "/store");
  const std::string out = dir.path() + "/cnn.csv";
  const std::string base = std::string(PACKRAT_CLI_PATH) + " profile --config " + config +
                           " --model cnn --out " + out +
                           " --threads 1 --batches 2 --max-seconds-per-point 1";

  auto [rc, log] = RunCommand(base + " --alone");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(FirstLine(out + ".key").find(" load=alone"), std::string::npos);
  EXPECT_EQ(log.find("neighbour"), std::string::npos) << log;

  std::tie(rc, log) = RunCommand(base);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_EQ(log.find("resuming"), std::string::npos) << log;
  EXPECT_NE(log.find("1/1 <t=1,b=2>"), std::string::npos) << log;
  EXPECT_NE(FirstLine(out + ".key").find(" load=neighbours"), std::string::npos);
  if (UsableCores() >= 2) {
    const std::string neighbours =
        "next to " + std::to_string(UsableCores() - 1) + " busy neighbour(s) of 1 thread(s)";
    EXPECT_NE(log.find(neighbours), std::string::npos) << log;
    EXPECT_NE(log.find("cnn-neighbour"), std::string::npos) << log;
  }
  auto profile = Profile::LoadCsv(out);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->size(), 1u);
}

TEST(ProfileIntegrationTest, ProfileCommandRejectsBadFlags) {
  auto [rc, log] = RunCommand(std::string(PACKRAT_CLI_PATH) + " profile --model x");
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("--config is required"), std::string::npos) << log;
  TempDir dir;
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << CnnConfig(dir.path());
  std::tie(rc, log) = RunCommand(std::string(PACKRAT_CLI_PATH) + " profile --config " + config +
                                 " --model nope --out " + dir.path() + "/x.csv");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("model 'nope' is not in"), std::string::npos) << log;
  std::tie(rc, log) = RunCommand(std::string(PACKRAT_CLI_PATH) + " profile --config " + config +
                                 " --model cnn --threads 1-x --out " + dir.path() + "/x.csv");
  EXPECT_EQ(rc, 2) << log;
}

TEST(ProfileIntegrationTest, AutoInstancesProfilePlanAndServe) {
  TempDir dir;
  const std::string store = dir.path() + "/store";
  std::string plan_line;
  for (int start = 0; start < 2; ++start) {
    testing::AgentProcess agent(PACKRAT_AGENT_PATH, CnnConfig(store));
    ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
    if (start == 1) {
      EXPECT_TRUE(agent.WaitForLog("using stored profile")) << agent.Digest();
    }
    // The profile is there: measured on the first start (with progress), stored on the second.
    testing::HttpClient metrics("127.0.0.1", agent.metrics_port());
    const std::string page = metrics.Get("/metrics").body;
    EXPECT_NE(page.find("packrat_profile_progress_ratio{model=\"cnn\"} 1\n"), std::string::npos)
        << page;

    testing::HttpClient management("127.0.0.1", agent.management_port());
    const auto meta = management.Get("/v2/models/cnn");
    ASSERT_EQ(meta.status, 200);
    EXPECT_NE(meta.body.find("\"predicted_batch_latency_ms\":"), std::string::npos) << meta.body;
    EXPECT_NE(meta.body.find("\"state\":\"READY\""), std::string::npos) << meta.body;
    const size_t at = meta.body.find("\"instances\":[");
    ASSERT_NE(at, std::string::npos) << meta.body;
    const std::string instances = meta.body.substr(at, meta.body.find(']', at) - at);
    if (start == 0) plan_line = instances;
    EXPECT_EQ(instances, plan_line);  // the stored profile gives the same plan

    // The plan's instances serve.
    testing::HttpClient client("127.0.0.1", agent.http_port());
    std::string data = "[";
    for (int i = 0; i < 2 * 3 * 32 * 32; ++i) data += (i ? ",0.5" : "0.5");
    data += "]";
    const auto r =
        client.Post("/v2/models/cnn/infer",
                    R"({"inputs":[{"name":"image","shape":[2,3,32,32],"datatype":"FP32","data":)" +
                        data + "}]}");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"shape\":[2,10]"), std::string::npos);
    EXPECT_TRUE(agent.Stop(SIGTERM).has_value());
  }
  // One stored profile with its key.
  int csv = 0;
  for (const auto& e : std::filesystem::directory_iterator(store)) {
    csv += e.path().extension() == ".csv" ? 1 : 0;
  }
  EXPECT_EQ(csv, 1);
}

// `profile:` ships a profile measured elsewhere: the agent plans on it and measures nothing.
TEST(ProfileIntegrationTest, AutoInstancesPlanOnAShippedProfile) {
  TempDir dir;
  const std::string store = dir.path() + "/store";
  // Only one-thread points, the two-row batch cheap: plans of ⟨t=1, b=2⟩ instances (one, or
  // two for B = 4 where two cores are usable), predicted 12 ms.
  std::ofstream(dir.path() + "/shipped.csv")
      << "threads,batch,latency_ms\n1,1,11\n1,2,12\n1,4,30\n";
  testing::AgentProcess agent(PACKRAT_AGENT_PATH,
                              CnnConfig(store) + "    profile: " + dir.path() + "/shipped.csv\n");
  ASSERT_TRUE(agent.WaitUntilServing()) << agent.Digest();
  testing::HttpClient management("127.0.0.1", agent.management_port());
  const auto meta = management.Get("/v2/models/cnn");
  ASSERT_EQ(meta.status, 200);
  EXPECT_NE(meta.body.find("\"predicted_batch_latency_ms\":12"), std::string::npos) << meta.body;
  EXPECT_NE(meta.body.find("\"threads\":1,\"batch\":2"), std::string::npos) << meta.body;
  testing::HttpClient client("127.0.0.1", agent.http_port());
  std::string data = "[";
  for (int i = 0; i < 3 * 32 * 32; ++i) data += (i ? ",0.5" : "0.5");
  data += "]";
  const auto r = client.Post(
      "/v2/models/cnn/infer",
      R"({"inputs":[{"name":"image","shape":[1,3,32,32],"datatype":"FP32","data":)" + data + "}]}");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(agent.Stop(SIGTERM).has_value());
  // Nothing was measured, so nothing was stored.
  int csv = 0;
  if (std::filesystem::exists(store)) {
    for (const auto& e : std::filesystem::directory_iterator(store)) {
      csv += e.path().extension() == ".csv" ? 1 : 0;
    }
  }
  EXPECT_EQ(csv, 0);
}

}  // namespace
}  // namespace packrat
