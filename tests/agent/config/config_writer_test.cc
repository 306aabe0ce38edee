#include "agent/config/config_writer.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "agent/config/config_reader.h"

namespace packrat {
namespace {

using config_internal::kAccuracyKeys;
using config_internal::kBatchingKeys;
using config_internal::kEmulateKeys;
using config_internal::kGenerationKeys;
using config_internal::kInstanceKeys;
using config_internal::kModelKeys;
using config_internal::kOptimizeKeys;
using config_internal::kReconfigurationKeys;
using config_internal::kServerKeys;
using config_internal::kSharedMemoryKeys;
using config_internal::kTensorKeys;

const std::string kProfile = std::string(PACKRAT_SOURCE_DIR) + "/docs/profiles/resnet50-2core.csv";

// A node with every server key but the virtual node's, and a model of each kind that is not
// emulated: batched with `instances: auto` and a measured profile, layered, generative.
std::string RealNode() {
  return R"(server:
  http: "[::1]:8080"
  management: 127.0.0.1:0
  metrics: 0.0.0.0:9100
  grpc: 0.0.0.0:8001
  unix_socket: sock/agent.sock
  grpc_unix_socket: /run/packrat/grpc.sock
  shared_memory: {key_prefix: app-, dir: /run/packrat-shm}
  io_threads: 3
  max_body_bytes: 2097152
  max_header_bytes: 8192
  grpc_max_message_bytes: 1048576
  grpc_max_concurrent_streams: 64
  idle_timeout_s: 20
  read_timeout_s: 10
  max_connections: 99
  shutdown_timeout_s: 7
  drain_delay_s: 2
  runtime_path: /opt/packrat/bin/packrat-runtime
  runtime_idle_spin_us: 50
  profile_dir: cache
  cgroups: false
  strict_readiness: false
  management_token_file: token
  model_repository: repo
  model_control: explicit
  node_partition: false
  partition_interval_ms: 500
  log_format: json
  access_log: logfmt
  access_log_path: access.log
models:
  - name: auto
    path: m.pt
    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 8]}]
    outputs: [{name: y, datatype: INT64, shape: [-1]}]
    batching: {max_batch: 32, max_delay_us: 100, max_inflight_batches: 3, max_queue_rows: 77,
               timeout_ms: 900, p99_target_ms: 300.5, variable_tensor_bytes: 8192}
    instances: auto
    profile: )" +
         kProfile +
         R"(
    auto_threads: 4
    min_threads: 2
    weight: 1.5
    warmup_iterations: 0
    startup_timeout_s: 9
    slice_timeout_s: 0
    reconfiguration: {adaptive: false, sample_period_ms: 20, drain_timeout_s: 4,
                      max_utilization: 0.7, overload_window_ms: 0, scale_down_delay_ms: 5,
                      slowdown_floor: 0.5, skip_warmup_on_busy_cpus: false, parked_runtimes: 3,
                      min_capacity: 12.5, idle_start_s: 0.5}
    optimize: {precision: bf16, memory_format: channels_last, freeze: true,
               allow_emulated_bf16: true}
    accuracy: {samples: 2, max_rel_error: 0.125, min_top1_agreement: 0.75, strict: true}
  - name: layered
    path: /abs/staged.pt
    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]
    batching: {mode: layered, latency_budget_ms: 250.5, profile_repeats: 3, max_batch_latency_ms: 7}
    instances: [{count: 2, threads: 1, batch: 4}]
  - name: gpt
    path: gpt.pt
    generation: {refill: half, max_tokens: 64, default_max_tokens: 8, max_prompt_tokens: 128}
    instances: [{count: 1, threads: 2, batch: 8}]
)";
}

// A virtual node: the rest of the server keys, and an emulated model.
std::string VirtualNode() {
  return R"(server:
  grpc: "off"
  shared_memory: "off"
  virtual_cpus: 32
  virtual_cpus_per_socket: 16
models:
  - name: emulated
    emulate: {profile: )" +
         kProfile + ", truth: " + kProfile + R"(, load_s: 0.5, neighbour_slowdown: 0.25,
              profile_error: 0.2, jitter_cv: 0.1, seed: 42}
    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 16]}]
    batching: {max_batch: 64}
    instances: auto
    reconfiguration: {parked_runtimes: auto}
)";
}

Config Parse(const std::string& text) {
  auto config = ParseConfig(text, "test.yaml", "/etc/packrat");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

// The keys written under each section, across every `models[]` entry.
struct WrittenKeys {
  std::set<std::string> server, shared_memory, model, tensor, instance, generation, batching,
      optimize, accuracy, reconfiguration, emulate;

  void Add(const std::string& yaml) {
    const YAML::Node root = YAML::Load(yaml);
    auto keys = [](const YAML::Node& map, std::set<std::string>* out) {
      if (!map.IsDefined() || !map.IsMap()) return;
      for (const auto& kv : map) out->insert(kv.first.as<std::string>());
    };
    keys(root["server"], &server);
    keys(root["server"]["shared_memory"], &shared_memory);
    for (const YAML::Node& m : root["models"]) {
      keys(m, &model);
      for (const char* list : {"inputs", "outputs"}) {
        if (m[list].IsDefined()) {
          for (const YAML::Node& t : m[list]) keys(t, &tensor);
        }
      }
      if (m["instances"].IsSequence()) {
        for (const YAML::Node& g : m["instances"]) keys(g, &instance);
      }
      keys(m["generation"], &generation);
      keys(m["batching"], &batching);
      keys(m["optimize"], &optimize);
      keys(m["accuracy"], &accuracy);
      keys(m["reconfiguration"], &reconfiguration);
      keys(m["emulate"], &emulate);
    }
  }
};

TEST(ConfigWriterTest, AWrittenConfigReadsBackToTheSameConfig) {
  for (const std::string& text : {RealNode(), VirtualNode()}) {
    const Config config = Parse(text);
    const std::string written = WriteConfig(config);
    const Config again = Parse(written);
    EXPECT_EQ(WriteConfig(again), written);
    // A few values that a writer could lose on the way: an IPv6 host, a derived limit, a
    // resolved path, a fraction, the parked runtimes' `auto`.
    EXPECT_EQ(again.server.http.host, config.server.http.host);
    EXPECT_EQ(again.server.grpc_enabled, config.server.grpc_enabled);
    EXPECT_EQ(again.server.grpc_max_message_bytes, config.server.grpc_max_message_bytes);
    EXPECT_EQ(again.server.profile_dir, config.server.profile_dir);
    ASSERT_EQ(again.models.size(), config.models.size());
    for (size_t i = 0; i < config.models.size(); ++i) {
      const ModelConfig& a = config.models[i];
      const ModelConfig& b = again.models[i];
      EXPECT_EQ(b.path, a.path);
      EXPECT_EQ(b.instances, a.instances);
      EXPECT_EQ(b.batching.max_batch_latency_ms, a.batching.max_batch_latency_ms);
      EXPECT_EQ(b.reconfiguration.sample_period_ms, a.reconfiguration.sample_period_ms);
      EXPECT_EQ(b.reconfiguration.parked_runtimes, a.reconfiguration.parked_runtimes);
      EXPECT_EQ(b.reconfiguration.slowdown_floor, a.reconfiguration.slowdown_floor);
      EXPECT_EQ(b.emulate.profile_error, a.emulate.profile_error);
    }
  }
}

TEST(ConfigWriterTest, ItWritesTheValuesTheAgentUsesNotOnlyThoseGiven) {
  const Config config = Parse(RealNode());
  const YAML::Node written = YAML::Load(WriteConfig(config));
  EXPECT_EQ(written["server"]["http"].as<std::string>(), "[::1]:8080");
  EXPECT_EQ(written["server"]["profile_dir"].as<std::string>(), "/etc/packrat/cache");
  EXPECT_EQ(written["server"]["unix_socket"].as<std::string>(), "/etc/packrat/sock/agent.sock");
  EXPECT_EQ(written["models"][0]["path"].as<std::string>(), "/etc/packrat/m.pt");
  // Defaults of keys the file leaves out, and a limit derived from the p99 target.
  EXPECT_EQ(written["models"][1]["reconfiguration"]["max_utilization"].as<double>(), 0.8);
  EXPECT_EQ(written["models"][0]["batching"]["max_batch_latency_ms"].as<double>(), 300.5 / 3);
  EXPECT_EQ(written["models"][0]["instances"].as<std::string>(), "auto");
}

TEST(ConfigWriterTest, ItWritesEveryKeyTheParserAccepts) {
  WrittenKeys written;
  written.Add(WriteConfig(Parse(RealNode())));
  written.Add(WriteConfig(Parse(VirtualNode())));
  EXPECT_EQ(written.server, kServerKeys);
  EXPECT_EQ(written.shared_memory, kSharedMemoryKeys);
  EXPECT_EQ(written.model, kModelKeys);
  EXPECT_EQ(written.tensor, kTensorKeys);
  EXPECT_EQ(written.instance, kInstanceKeys);
  EXPECT_EQ(written.generation, kGenerationKeys);
  EXPECT_EQ(written.batching, kBatchingKeys);
  EXPECT_EQ(written.optimize, kOptimizeKeys);
  EXPECT_EQ(written.accuracy, kAccuracyKeys);
  EXPECT_EQ(written.reconfiguration, kReconfigurationKeys);
  EXPECT_EQ(written.emulate, kEmulateKeys);
}

}  // namespace
}  // namespace packrat
