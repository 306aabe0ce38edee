#include "agent/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace packrat {
namespace {

// Line numbers below are 1-based and refer to this text.
constexpr char kValidConfig[] = R"(server:
  http: 0.0.0.0:0
  management: "[::1]:9091"
  io_threads: 4
  max_body_bytes: 1048576
  idle_timeout_s: 30
  runtime_path: /opt/packrat/bin/packrat-runtime
  shutdown_timeout_s: 5
models:
  - name: resnet
    path: models/resnet18.pt
    inputs:
      - name: input__0
        datatype: FP32
        shape: [-1, 3, 224, 224]
    outputs:
      - {name: output__0, datatype: FP32, shape: [-1, 1000]}
    batching: {max_batch: 64, max_delay_us: 500, max_inflight_batches: 3, max_queue_rows: 256}
    instances:
      - {count: 2, threads: 4, batch: 8}
      - {count: 3, threads: 1, batch: 2}
    warmup_iterations: 1
    startup_timeout_s: 60
    slice_timeout_s: 0
  - name: bert.tiny-v2
    path: /abs/bert.pt
    inputs:
      - {name: ids, datatype: INT64, shape: [-1, -1]}
      - {name: mask, datatype: INT64, shape: [-1, -1]}
    outputs:
      - {name: logits, datatype: FP16, shape: [-1, 2]}
    instances: [{count: 1, threads: 2, batch: 1}]
)";

StatusOr<Config> Parse(const std::string& text) {
  return ParseConfig(text, "test.yaml", "/etc/packrat");
}

// The config's error message, or "" if it parsed.
std::string ErrorOf(const std::string& text) {
  auto config = Parse(text);
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  return config.status().message();
}

// A minimal valid model list with `model_extra` appended to the one model's mapping.
std::string OneModel(const std::string& model_extra = "",
                     const std::string& instances = "[{count: 1, threads: 1, batch: 4}]") {
  return "models:\n"                                                   // 1
         "  - name: demo\n"                                            // 2
         "    path: demo.pt\n"                                         // 3
         "    inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"   // 4
         "    outputs: [{name: y, datatype: FP32, shape: [-1, 1]}]\n"  // 5
         "    instances: " +                                           // 6
         instances +
         "\n" + model_extra;
}

class ConfigTest : public ::testing::Test {};

TEST_F(ConfigTest, ParsesAFullConfig) {
  auto config = Parse(kValidConfig);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "test.yaml");

  const ServerConfig& s = config->server;
  EXPECT_EQ(s.http.host, "0.0.0.0");
  EXPECT_EQ(s.http.port, 0);
  EXPECT_EQ(s.management.host, "::1");
  EXPECT_EQ(s.management.port, 9091);
  EXPECT_EQ(s.io_threads, 4);
  EXPECT_EQ(s.max_body_bytes, 1048576u);
  EXPECT_EQ(s.max_header_bytes, 16u << 10);  // default kept
  EXPECT_EQ(s.idle_timeout_s, 30);
  EXPECT_EQ(s.runtime_path, "/opt/packrat/bin/packrat-runtime");
  EXPECT_EQ(s.shutdown_timeout_s, 5);

  ASSERT_EQ(config->models.size(), 2u);
  const ModelConfig& m = config->models[0];
  EXPECT_EQ(m.name, "resnet");
  EXPECT_EQ(m.path, "/etc/packrat/models/resnet18.pt");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "input__0");
  EXPECT_EQ(m.inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(m.inputs[0].shape, (std::vector<int64_t>{-1, 3, 224, 224}));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].name, "output__0");
  EXPECT_EQ(m.outputs[0].shape, (std::vector<int64_t>{-1, 1000}));
  EXPECT_EQ(m.batching.max_batch, 64);
  EXPECT_EQ(m.batching.max_delay_us, 500);
  EXPECT_EQ(m.batching.max_inflight_batches, 3);
  EXPECT_EQ(m.batching.max_queue_rows, 256);
  ASSERT_EQ(m.instances.size(), 2u);
  EXPECT_EQ(m.instances[0].count, 2);
  EXPECT_EQ(m.instances[0].threads, 4);
  EXPECT_EQ(m.instances[0].batch, 8);
  EXPECT_EQ(m.instances[1].count, 3);
  EXPECT_EQ(m.instances[1].threads, 1);
  EXPECT_EQ(m.instances[1].batch, 2);
  EXPECT_EQ(m.TargetBatch(), 2 * 8 + 3 * 2);
  EXPECT_EQ(m.warmup_iterations, 1);
  EXPECT_EQ(m.startup_timeout_s, 60);
  EXPECT_EQ(m.slice_timeout_s, 0);  // never

  const ModelSignature sig = m.Signature();
  EXPECT_EQ(sig.name, "resnet");
  EXPECT_EQ(sig.max_batch, 64);
  EXPECT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.outputs.size(), 1u);

  const ModelConfig& b = config->models[1];
  EXPECT_EQ(b.name, "bert.tiny-v2");
  EXPECT_EQ(b.path, "/abs/bert.pt");  // absolute paths are kept
  ASSERT_EQ(b.inputs.size(), 2u);
  EXPECT_EQ(b.inputs[1].name, "mask");
  EXPECT_EQ(b.inputs[1].datatype, DataType::kInt64);
  EXPECT_EQ(b.inputs[1].shape, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(b.outputs[0].datatype, DataType::kFp16);
  EXPECT_EQ(b.TargetBatch(), 1);
  // Defaults where the file says nothing.
  const BatchingConfig defaults;
  EXPECT_EQ(b.batching.max_batch, defaults.max_batch);
  EXPECT_EQ(b.batching.max_delay_us, defaults.max_delay_us);
  EXPECT_EQ(b.batching.max_inflight_batches, defaults.max_inflight_batches);
  EXPECT_EQ(b.batching.max_queue_rows, defaults.max_queue_rows);
  EXPECT_EQ(b.warmup_iterations, 3);
  EXPECT_EQ(b.startup_timeout_s, 300);
  EXPECT_EQ(b.slice_timeout_s, 60);
}

TEST_F(ConfigTest, ServerSectionIsOptional) {
  auto config = Parse(OneModel());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.http.host, "127.0.0.1");
  EXPECT_EQ(config->server.http.port, 8080);
  EXPECT_EQ(config->server.management.port, 8081);
  EXPECT_EQ(config->server.io_threads, 2);
}

TEST_F(ConfigTest, ResolvesRelativeModelPathsAgainstBaseDir) {
  auto config = ParseConfig(OneModel(), "x.yaml", "/srv/conf");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].path, "/srv/conf/demo.pt");

  std::string up = OneModel();
  up.replace(up.find("demo.pt"), 7, "../models/./demo.pt");
  config = ParseConfig(up, "x.yaml", "/srv/conf");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].path, "/srv/models/demo.pt");
}

TEST_F(ConfigTest, TargetBatchSumsCountTimesBatch) {
  ModelConfig m;
  EXPECT_EQ(m.TargetBatch(), 0);
  m.instances = {{4, 1, 1}, {1, 8, 16}, {2, 2, 3}};
  EXPECT_EQ(m.TargetBatch(), 4 * 1 + 1 * 16 + 2 * 3);
}

TEST_F(ConfigTest, UnknownKeyNamesFileLineAndKey) {
  EXPECT_EQ(ErrorOf(OneModel("    batching: {max_dealy_us: 10}\n")),
            "test.yaml:7: models[0].batching.max_dealy_us: unknown key");
  EXPECT_EQ(ErrorOf(OneModel("    warmup: 2\n")), "test.yaml:7: models[0].warmup: unknown key");
  EXPECT_EQ(ErrorOf("server:\n  http: 127.0.0.1:1\n  htpp: 127.0.0.1:2\n" + OneModel()),
            "test.yaml:3: server.htpp: unknown key");
  EXPECT_EQ(ErrorOf(OneModel() + "modles: []\n"), "test.yaml:7: (top level).modles: unknown key");
}

TEST_F(ConfigTest, MissingModelsIsAnError) {
  EXPECT_EQ(ErrorOf("server:\n  io_threads: 2\n"),
            "test.yaml:1: models: must be a non-empty list (or set server.model_repository)");
  EXPECT_EQ(ErrorOf("server:\n  io_threads: 2\nmodels: []\n"),
            "test.yaml:3: models: must be a non-empty list (or set server.model_repository)");
  const std::string empty = ErrorOf("");
  EXPECT_EQ(empty.rfind("test.yaml", 0), 0u) << empty;
}

TEST_F(ConfigTest, BadDatatypeNamesTheTensor) {
  std::string text = OneModel();
  text.replace(text.find("datatype: FP32"), 14, "datatype: FP33");
  EXPECT_EQ(ErrorOf(text), "test.yaml:4: models[0].inputs[0].datatype: unknown datatype 'FP33'");
}

TEST_F(ConfigTest, FirstDimMustBeTheBatchDim) {
  std::string text = OneModel();
  text.replace(text.find("shape: [-1, 1]"), 14, "shape: [8, 1]");
  EXPECT_EQ(ErrorOf(text),
            "test.yaml:5: models[0].outputs[0].shape: the first dim is the batch dim and must be "
            "-1");
}

TEST_F(ConfigTest, BadShapesAreRejected) {
  std::string text = OneModel();
  text.replace(text.find("shape: [-1, 3]"), 14, "shape: [-1, 0]");
  EXPECT_EQ(ErrorOf(text), "test.yaml:4: models[0].inputs[0].shape: dims must be -1 or >= 1");
  text = OneModel();
  text.replace(text.find("shape: [-1, 3]"), 14, "shape: []");
  EXPECT_EQ(ErrorOf(text),
            "test.yaml:4: models[0].inputs[0].shape: must be a non-empty list of dims");
  text = OneModel();
  text.replace(text.find("shape: [-1, 3]"), 14, "shape: [-1, x]");
  EXPECT_EQ(ErrorOf(text), "test.yaml:4: models[0].inputs[0].shape[1]: has the wrong type");
}

TEST_F(ConfigTest, InstanceThreadsMustBePositive) {
  EXPECT_EQ(ErrorOf(OneModel("", "[{count: 1, threads: 0, batch: 4}]")),
            "test.yaml:6: models[0].instances[0].threads: must be between 1 and 1024");
  EXPECT_EQ(ErrorOf(OneModel("",
                             "\n      - {count: 1, threads: 1, batch: 4}\n"
                             "      - {count: 0, threads: 1, batch: 4}")),
            "test.yaml:8: models[0].instances[1].count: must be between 1 and 1024");
  EXPECT_EQ(ErrorOf(OneModel("", "[{count: 1, batch: 4}]")),
            "test.yaml:6: models[0].instances[0].threads: is required");
  EXPECT_EQ(ErrorOf(OneModel("", "[]")),
            "test.yaml:6: models[0].instances: must be 'auto' or a non-empty list of {count, "
            "threads, batch}");
}

TEST_F(ConfigTest, AutoInstancesPlanForMaxBatch) {
  auto config = Parse(OneModel("    batching: {max_batch: 16}\n    auto_threads: 8\n", "auto"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ModelConfig& m = config->models[0];
  EXPECT_TRUE(m.auto_instances);
  EXPECT_TRUE(m.instances.empty());
  EXPECT_EQ(m.auto_threads, 8);
  EXPECT_EQ(m.TargetBatch(), 16);
  EXPECT_EQ(config->server.profile_dir, "/etc/packrat/profiles");
  EXPECT_EQ(ErrorOf(OneModel("", "auto")),
            "test.yaml:6: models[0].instances: 'auto' needs batching.max_batch (the B the "
            "optimizer plans for)");
  EXPECT_EQ(ErrorOf(OneModel("", "sometimes")),
            "test.yaml:6: models[0].instances: must be 'auto' or a non-empty list of {count, "
            "threads, batch}");
}

TEST_F(ConfigTest, ReconfigurationSection) {
  auto config = Parse(OneModel(""));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->models[0].reconfiguration.skip_warmup_on_busy_cpus);
  EXPECT_EQ(config->models[0].reconfiguration.idle_start_s, 3);
  EXPECT_EQ(config->models[0].reconfiguration.overload_window_ms, 2000);
  EXPECT_EQ(config->models[0].reconfiguration.scale_down_delay_ms, 30000);
  EXPECT_EQ(config->models[0].reconfiguration.slowdown_floor, 0.8);
  EXPECT_EQ(config->models[0].reconfiguration.min_capacity, 0);
  config =
      Parse(OneModel("    reconfiguration: {sample_period_ms: 50, max_utilization: 1, "
                     "skip_warmup_on_busy_cpus: false, overload_window_ms: 0, "
                     "scale_down_delay_ms: 5000, slowdown_floor: 1, min_capacity: 215.5, "
                     "idle_start_s: 0}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ReconfigurationConfig& r = config->models[0].reconfiguration;
  EXPECT_EQ(r.sample_period_ms, 50);
  EXPECT_EQ(r.max_utilization, 1);
  EXPECT_FALSE(r.skip_warmup_on_busy_cpus);
  EXPECT_EQ(r.idle_start_s, 0);
  EXPECT_EQ(r.overload_window_ms, 0);
  EXPECT_EQ(r.scale_down_delay_ms, 5000);
  EXPECT_EQ(r.slowdown_floor, 1);
  EXPECT_EQ(r.min_capacity, 215.5);
  EXPECT_NE(ErrorOf(OneModel("    reconfiguration: {min_capacity: -1}\n")).find("min_capacity"),
            std::string::npos);
  // A retired key is refused with what stands in its place, whatever its value.
  for (const char* retired :
       {"alpha: 0.2", "window: 50", "timeout_ms: 10000", "restart_margin: 0.1",
        "plan_at_rate: false", "burst_reserve_ms: 0"}) {
    const std::string error =
        ErrorOf(OneModel(std::string("    reconfiguration: {") + retired + "}\n"));
    const std::string key(retired, std::string_view(retired).find(':'));
    EXPECT_NE(error.find("reconfiguration." + key + ": no longer a setting"), std::string::npos)
        << error;
  }
  EXPECT_NE(
      ErrorOf(OneModel("    reconfiguration: {slowdown_floor: 0.1}\n")).find("slowdown_floor"),
      std::string::npos);
  EXPECT_NE(ErrorOf(OneModel("    reconfiguration: {idle_start_s: -1}\n")).find("idle_start_s"),
            std::string::npos);
  EXPECT_NE(ErrorOf(OneModel("    reconfiguration: {skip_warmup_on_busy_cpus: often}\n"))
                .find("skip_warmup_on_busy_cpus"),
            std::string::npos);
  EXPECT_NE(ErrorOf(OneModel("    reconfiguration: {overload_window_ms: -1}\n"))
                .find("overload_window_ms"),
            std::string::npos);
}

TEST_F(ConfigTest, ParkedRuntimes) {
  auto config = Parse(OneModel(""));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].reconfiguration.parked_runtimes, ReconfigurationConfig::kParkAuto);
  for (const auto& [text, value] : std::vector<std::pair<std::string, int64_t>>{
           {"auto", ReconfigurationConfig::kParkAuto}, {"0", 0}, {"6", 6}}) {
    config = Parse(OneModel("    reconfiguration: {parked_runtimes: " + text + "}\n"));
    ASSERT_TRUE(config.ok()) << text << ": " << config.status().ToString();
    EXPECT_EQ(config->models[0].reconfiguration.parked_runtimes, value) << text;
  }
  for (const std::string bad : {"-1", "some", "[1]", "5000"}) {
    EXPECT_NE(ErrorOf(OneModel("    reconfiguration: {parked_runtimes: " + bad + "}\n"))
                  .find("reconfiguration.parked_runtimes"),
              std::string::npos)
        << bad;
  }
}

TEST_F(ConfigTest, MetricsEndpointAndProfileDir) {
  auto config = Parse("server: {metrics: 0.0.0.0:9100, profile_dir: cache}\n" + OneModel());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.metrics.host, "0.0.0.0");
  EXPECT_EQ(config->server.metrics.port, 9100);
  EXPECT_EQ(config->server.profile_dir, "/etc/packrat/cache");
  auto defaults = Parse(OneModel());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->server.metrics.port, 8082);
}

TEST_F(ConfigTest, GrpcEndpointLimitsAndOff) {
  auto defaults = Parse(OneModel());
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->server.grpc_enabled);
  EXPECT_FALSE(defaults->server.grpc_explicit);
  EXPECT_EQ(defaults->server.grpc.host, "127.0.0.1");
  EXPECT_EQ(defaults->server.grpc.port, 8001);
  EXPECT_EQ(defaults->server.grpc_max_message_bytes, defaults->server.max_body_bytes);
  EXPECT_EQ(defaults->server.grpc_max_concurrent_streams, 1024);

  auto set = Parse(
      "server: {grpc: 0.0.0.0:0, grpc_max_message_bytes: 4096, grpc_max_concurrent_streams: 8}\n" +
      OneModel());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_TRUE(set->server.grpc_enabled);
  EXPECT_TRUE(set->server.grpc_explicit);
  EXPECT_EQ(set->server.grpc.host, "0.0.0.0");
  EXPECT_EQ(set->server.grpc.port, 0);
  EXPECT_EQ(set->server.grpc_max_message_bytes, 4096u);
  EXPECT_EQ(set->server.grpc_max_concurrent_streams, 8);

  // The message limit follows max_body_bytes unless given (capped at what gRPC takes).
  auto body = Parse("server: {max_body_bytes: 2048}\n" + OneModel());
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->server.grpc_max_message_bytes, 2048u);
  auto huge = Parse("server: {max_body_bytes: 1099511627776}\n" + OneModel());
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->server.grpc_max_message_bytes, 2147483647u);

  auto off = Parse("server: {grpc: off}\n" + OneModel());
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->server.grpc_enabled);

  EXPECT_EQ(ErrorOf("server:\n  grpc: nowhere\n" + OneModel()),
            "test.yaml:2: server.grpc: 'nowhere' is not HOST:PORT (or off)");
  EXPECT_NE(ErrorOf("server: {grpc: \"\"}\n" + OneModel()).find("server.grpc"), std::string::npos);
  EXPECT_NE(ErrorOf("server: {grpc: [1]}\n" + OneModel()).find("server.grpc"), std::string::npos);
  EXPECT_NE(ErrorOf("server: {grpc_max_message_bytes: 10}\n" + OneModel())
                .find("server.grpc_max_message_bytes: must be between 1024 and 2147483647"),
            std::string::npos);
  EXPECT_NE(ErrorOf("server: {grpc_max_concurrent_streams: 0}\n" + OneModel())
                .find("server.grpc_max_concurrent_streams"),
            std::string::npos);
}

TEST_F(ConfigTest, SharedMemory) {
  auto defaults = Parse(OneModel());
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->server.shared_memory.enabled);
  EXPECT_EQ(defaults->server.shared_memory.key_prefix, "");
  EXPECT_EQ(defaults->server.shared_memory.dir, "/dev/shm");

  auto set = Parse("server: {shared_memory: {key_prefix: app-, dir: /run/clients}}\n" + OneModel());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_TRUE(set->server.shared_memory.enabled);
  EXPECT_EQ(set->server.shared_memory.key_prefix, "app-");
  EXPECT_EQ(set->server.shared_memory.dir, "/run/clients");
  auto off = Parse("server: {shared_memory: off}\n" + OneModel());
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->server.shared_memory.enabled);

  EXPECT_EQ(ErrorOf("server:\n  shared_memory: maybe\n" + OneModel()),
            "test.yaml:2: server.shared_memory: must be on, off or {key_prefix: ...}, not 'maybe'");
  EXPECT_NE(ErrorOf("server: {shared_memory: {dir: relative}}\n" + OneModel())
                .find("server.shared_memory.dir: must be an absolute path"),
            std::string::npos);
  EXPECT_NE(ErrorOf("server: {shared_memory: {key_prefix: a/b}}\n" + OneModel())
                .find("server.shared_memory.key_prefix"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("server: {shared_memory: {prefix: a}}\n" + OneModel()).find("server.shared_memory"),
      std::string::npos);
}

TEST_F(ConfigTest, ShippedConfigsParse) {
  for (const char* file : {"/config/demo.yaml", "/deploy/config/packrat.yaml"}) {
    auto config = LoadConfig(std::string(PACKRAT_SOURCE_DIR) + file);
    EXPECT_TRUE(config.ok()) << file << ": " << config.status().ToString();
  }
}

TEST_F(ConfigTest, UnixSocketIsOptionalAndResolvedAgainstBaseDir) {
  auto defaults = Parse(OneModel());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->server.unix_socket, "");
  auto absolute = Parse("server: {unix_socket: /run/packrat/agent.sock}\n" + OneModel());
  ASSERT_TRUE(absolute.ok()) << absolute.status().ToString();
  EXPECT_EQ(absolute->server.unix_socket, "/run/packrat/agent.sock");
  auto relative = Parse("server: {unix_socket: run/agent.sock}\n" + OneModel());
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_EQ(relative->server.unix_socket, "/etc/packrat/run/agent.sock");
  EXPECT_EQ(ErrorOf("server:\n  unix_socket: \"\"\n" + OneModel()),
            "test.yaml:2: server.unix_socket: must not be empty");
  const std::string long_path = "/" + std::string(kMaxUnixSocketPath, 's');
  EXPECT_EQ(ErrorOf("server:\n  unix_socket: " + long_path + "\n" + OneModel()),
            "test.yaml:2: server.unix_socket: '" + long_path +
                "' is longer than 107 bytes (the limit of a Unix socket address)");
}

TEST_F(ConfigTest, DuplicateModelNamesAreRejected) {
  const std::string text = OneModel() +
                           "  - name: demo\n"                                           // 7
                           "    path: other.pt\n"                                       // 8
                           "    inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"  // 9
                           "    outputs: [{name: y, datatype: FP32, shape: [-1, 1]}]\n"
                           "    instances: [{count: 1, threads: 1, batch: 1}]\n";
  EXPECT_EQ(ErrorOf(text), "test.yaml:7: models[1].name: duplicate model name 'demo'");
}

TEST_F(ConfigTest, DuplicateTensorNamesAreRejected) {
  std::string text = OneModel();
  text.replace(text.find("{name: y,"), 9, "{name: x,");
  EXPECT_TRUE(Parse(text).ok()) << "inputs and outputs are separate namespaces";
  text = OneModel();
  text.replace(text.find("inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]"), 51,
               "inputs: [{name: x, datatype: FP32, shape: [-1, 3]}, {name: x, datatype: FP32, "
               "shape: [-1, 1]}]");
  EXPECT_EQ(ErrorOf(text), "test.yaml:4: models[0].inputs[1].name: must be non-empty and unique");
}

TEST_F(ConfigTest, BadValuesNameTheirKey) {
  EXPECT_EQ(ErrorOf("server:\n  io_threads: many\n" + OneModel()),
            "test.yaml:2: server.io_threads: has the wrong type");
  EXPECT_EQ(ErrorOf("server:\n  http: localhost\n" + OneModel()),
            "test.yaml:2: server.http: 'localhost' is not HOST:PORT");
  EXPECT_EQ(ErrorOf(OneModel("    batching: {max_inflight_batches: 0}\n")),
            "test.yaml:7: models[0].batching.max_inflight_batches: must be between 1 and 64");
  EXPECT_EQ(ErrorOf(OneModel("    slice_timeout_s: -1\n")),
            "test.yaml:7: models[0].slice_timeout_s: must be between 0 and 86400");
  std::string text = OneModel();
  text.replace(text.find("name: demo"), 10, "name: de mo");
  EXPECT_EQ(ErrorOf(text),
            "test.yaml:2: models[0].name: may hold only letters, digits, '_', '-', '.'");
  text = OneModel();
  text.replace(text.find("    path: demo.pt\n"), 18, "");
  EXPECT_EQ(ErrorOf(text), "test.yaml:2: models[0].path: is required");
}

TEST_F(ConfigTest, MaxBatchLatency) {
  auto config = Parse(OneModel("    batching: {max_batch: 8, max_batch_latency_ms: 450.5}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_DOUBLE_EQ(config->models[0].batching.max_batch_latency_ms, 450.5);
  EXPECT_DOUBLE_EQ(Parse(OneModel())->models[0].batching.max_batch_latency_ms, 0);  // no limit
  EXPECT_NE(ErrorOf(OneModel("    batching: {max_batch_latency_ms: -1}\n"))
                .find("models[0].batching.max_batch_latency_ms: must be between 0"),
            std::string::npos);
}

TEST_F(ConfigTest, JointPartitionKeys) {
  auto config = Parse(OneModel(
      "    batching: {max_batch: 8, p99_target_ms: 250.5}\n    min_threads: 2\n    weight: 1.5\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_DOUBLE_EQ(config->models[0].batching.p99_target_ms, 250.5);
  // The target bounds the batches where no limit is given: two in flight within it.
  EXPECT_DOUBLE_EQ(config->models[0].batching.max_batch_latency_ms, 250.5 / 2);
  auto limited = Parse(OneModel(
      "    batching: {p99_target_ms: 300, max_batch_latency_ms: 0, max_inflight_batches: 3}\n"));
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  EXPECT_DOUBLE_EQ(limited->models[0].batching.max_batch_latency_ms, 0);  // given: kept
  limited = Parse(OneModel("    batching: {p99_target_ms: 300, max_inflight_batches: 3}\n"));
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  EXPECT_DOUBLE_EQ(limited->models[0].batching.max_batch_latency_ms, 100);
  EXPECT_EQ(config->models[0].min_threads, 2);
  EXPECT_DOUBLE_EQ(config->models[0].weight, 1.5);
  auto defaults = Parse(OneModel());
  ASSERT_TRUE(defaults.ok());
  EXPECT_DOUBLE_EQ(defaults->models[0].batching.p99_target_ms, 0);  // none
  EXPECT_EQ(defaults->models[0].min_threads, 1);
  EXPECT_DOUBLE_EQ(defaults->models[0].weight, 1);
}

TEST_F(ConfigTest, JointPartitionKeysOutOfRange) {
  EXPECT_EQ(ErrorOf(OneModel("    batching: {p99_target_ms: 0}\n")),
            "test.yaml:7: models[0].batching.p99_target_ms: must be between 0.001000 and "
            "3600000.000000");
  EXPECT_EQ(ErrorOf(OneModel("    min_threads: 0\n")),
            "test.yaml:7: models[0].min_threads: must be between 1 and 4096");
  EXPECT_EQ(ErrorOf(OneModel("    weight: -1\n")),
            "test.yaml:7: models[0].weight: must be between 0.001000 and 1000.000000");
}

TEST_F(ConfigTest, VariableTensorBytes) {
  auto config = Parse(OneModel("    batching: {variable_tensor_bytes: 1048576}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].batching.variable_tensor_bytes, 1 << 20);
  EXPECT_EQ(Parse(OneModel())->models[0].batching.variable_tensor_bytes, 16 << 20);
  EXPECT_EQ(ErrorOf(OneModel("    batching: {variable_tensor_bytes: 100}\n")),
            "test.yaml:7: models[0].batching.variable_tensor_bytes: must be between 4096 and "
            "17179869184");
}

TEST_F(ConfigTest, LayeredBatchingKeys) {
  auto config = Parse(
      OneModel("    batching: {mode: layered, latency_budget_ms: 250.5, profile_repeats: 3}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const BatchingConfig& b = config->models[0].batching;
  EXPECT_EQ(b.mode, BatchingMode::kLayered);
  EXPECT_DOUBLE_EQ(b.latency_budget_ms, 250.5);
  EXPECT_EQ(b.profile_repeats, 3);
  EXPECT_EQ(Parse(OneModel())->models[0].batching.mode, BatchingMode::kBatched);

  EXPECT_EQ(ErrorOf(OneModel("    batching: {mode: layered}\n")),
            "test.yaml:7: models[0].batching.latency_budget_ms: is required with mode: layered");
  EXPECT_EQ(ErrorOf(OneModel("    batching: {mode: sideways}\n")),
            "test.yaml:7: models[0].batching.mode: must be 'batched' or 'layered'");
  EXPECT_EQ(ErrorOf(OneModel("    batching: {latency_budget_ms: 10}\n")),
            "test.yaml:7: models[0].batching: latency_budget_ms and profile_repeats need mode: "
            "layered");
  EXPECT_EQ(ErrorOf(OneModel("    batching: {mode: layered, latency_budget_ms: 0}\n")),
            "test.yaml:7: models[0].batching.latency_budget_ms: must be between 0.001000 and "
            "3600000.000000");
  EXPECT_EQ(ErrorOf(OneModel("    batching: {mode: layered, latency_budget_ms: 9, max_batch: 4}\n",
                             "auto")),
            "test.yaml:6: models[0].instances: layered batching needs an explicit plan "
            "([{count, threads, batch}])");
}

TEST_F(ConfigTest, MalformedYamlNamesFileAndLine) {
  const std::string error = ErrorOf(
      "models:\n"
      "  - name: demo\n"
      "    inputs: [{name: x, datatype: FP32\n"
      "    outputs: []\n");
  EXPECT_EQ(error.rfind("test.yaml:", 0), 0u) << error;
  const int line = std::atoi(error.c_str() + std::string("test.yaml:").size());
  EXPECT_GE(line, 3) << error;
  EXPECT_LE(line, 5) << error;

  EXPECT_EQ(ErrorOf("models:\n  - name: a\n   - name: b\n").rfind("test.yaml:3:", 0), 0u)
      << ErrorOf("models:\n  - name: a\n   - name: b\n");
}

TEST_F(ConfigTest, ParseEndpointAcceptsHostPort) {
  auto ep = ParseEndpoint("127.0.0.1:0");
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 0);

  ep = ParseEndpoint("[::1]:8080");
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->port, 8080);

  ep = ParseEndpoint("localhost:65535");
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_EQ(ep->host, "localhost");
  EXPECT_EQ(ep->port, 65535);
}

TEST_F(ConfigTest, ParseEndpointRejectsMalformedText) {
  for (const char* bad : {"", "localhost", ":8080", "127.0.0.1:", "127.0.0.1:http",
                          "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x", "[::1]"}) {
    auto ep = ParseEndpoint(bad);
    EXPECT_FALSE(ep.ok()) << "'" << bad << "' parsed as " << ep->host << ":" << ep->port;
    if (!ep.ok()) {
      EXPECT_EQ(ep.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "config_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // The error of loading `text` from a file, less the file's path (so ":LINE: KEY: ...").
  std::string LoadError(const std::string& text) {
    const std::string path = Write("bad.yaml", text);
    auto c = LoadConfig(path);
    EXPECT_FALSE(c.ok()) << text;
    std::string m = c.ok() ? "" : c.status().message();
    return m.rfind(path, 0) == 0 ? m.substr(path.size()) : m;
  }

  std::string dir_;
};

TEST_F(ConfigFileTest, LoadConfigResolvesPathsAgainstTheFilesFolder) {
  const std::string path = Write("packrat.yaml", OneModel());
  auto config = LoadConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, path);
  EXPECT_EQ(config->models[0].path,
            (std::filesystem::path(dir_) / "demo.pt").lexically_normal().string());
}

TEST_F(ConfigFileTest, LoadConfigErrorsNameTheFile) {
  const std::string path = Write("bad.yaml", OneModel("", "[{count: 1, threads: 0, batch: 4}]"));
  auto config = LoadConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            path + ":6: models[0].instances[0].threads: must be between 1 and 1024");
}

TEST_F(ConfigFileTest, LoadConfigOfMissingFileIsNotFound) {
  auto config = LoadConfig(dir_ + "/absent.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("absent.yaml"), std::string::npos);
}

// A virtual node and emulated models (agent/pool/virtual_node.h, emulator/).
TEST_F(ConfigFileTest, VirtualCpusAndEmulatedModels) {
  Write("prof.csv", "threads,batch,latency_ms\n1,1,10\n2,1,6\n");
  const std::string emulated =
      "  - name: e\n"                                                              // 3
      "    emulate: {profile: prof.csv, load_s: 2.5, neighbour_slowdown: 0.13}\n"  // 4
      "    inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"                  // 5
      "    outputs: [{name: y, datatype: FP32, shape: [-1, 1]}]\n"                 // 6
      "    batching: {max_batch: 8}\n"                                             // 7
      "    instances: auto\n";                                                     // 8
  auto config = LoadConfig(Write(
      "v.yaml", "server: {virtual_cpus: 64, virtual_cpus_per_socket: 32}\nmodels:\n" + emulated));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.virtual_cpus, 64);
  EXPECT_EQ(config->server.virtual_cpus_per_socket, 32);
  const EmulateConfig& e = config->models[0].emulate;
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.profile, (std::filesystem::path(dir_) / "prof.csv").lexically_normal().string());
  EXPECT_DOUBLE_EQ(e.load_s, 2.5);
  EXPECT_DOUBLE_EQ(e.neighbour_slowdown, 0.13);
  EXPECT_TRUE(config->models[0].path.empty());  // `path` is optional when emulated
  EXPECT_TRUE(e.node_state.empty());            // the agent's to set
  EXPECT_FALSE(e.virtual_node);

  // Emulation on the real CPUs needs no virtual node; defaults.
  config = LoadConfig(Write("e.yaml", "models:\n  - name: e\n    emulate: {profile: prof.csv}\n" +
                                          emulated.substr(emulated.find("    inputs"))));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server.virtual_cpus, 0);
  EXPECT_DOUBLE_EQ(config->models[0].emulate.load_s, 1.0);
  EXPECT_DOUBLE_EQ(config->models[0].emulate.neighbour_slowdown, 0.0);
  EXPECT_FALSE(Parse(OneModel())->models[0].emulate.enabled);

  auto error = [&](const std::string& text) { return LoadError(text); };
  EXPECT_EQ(error("server: {virtual_cpus: 0}\nmodels:\n" + emulated),
            ":1: server.virtual_cpus: must be between 1 and 1024");
  EXPECT_EQ(error("server: {virtual_cpus: 1025}\nmodels:\n" + emulated),
            ":1: server.virtual_cpus: must be between 1 and 1024");
  EXPECT_EQ(error("server: {virtual_cpus_per_socket: 8}\nmodels:\n" + emulated),
            ":1: server.virtual_cpus_per_socket: needs server.virtual_cpus");
  EXPECT_EQ(error("server: {virtual_cpus: 16, virtual_cpus_per_socket: 32}\nmodels:\n" + emulated),
            ":1: server.virtual_cpus_per_socket: must be between 1 and 16");
  // A real model on a virtual node would run libtorch on CPUs that do not exist.
  EXPECT_EQ(error("server: {virtual_cpus: 16}\n" + OneModel()),
            ":3: models[0]: is not emulated, and a virtual node (server.virtual_cpus) serves "
            "emulated models only: add `emulate: {profile: FILE.csv}`");
  std::string text = emulated;
  text.replace(text.find("prof.csv"), 8, "absent.csv");
  EXPECT_NE(error("models:\n" + text).find(":3: models[0].emulate.profile: cannot"),
            std::string::npos);
  text = emulated;
  text.replace(text.find("load_s: 2.5"), 11, "load_s: -1");
  EXPECT_EQ(error("models:\n" + text),
            ":3: models[0].emulate.load_s: must be between 0.000000 and 3600.000000");
  text = emulated;
  text.replace(text.find("load_s: 2.5"), 11, "speed: 2");
  EXPECT_EQ(error("models:\n" + text), ":3: models[0].emulate.speed: unknown key");
  EXPECT_EQ(error("models:\n  - name: e\n    emulate: {load_s: 1}\n" +
                  emulated.substr(emulated.find("    inputs"))),
            ":3: models[0].emulate.profile: is required");
  // A truth the agent does not plan on: another profile, a profile error, jitter.
  Write("truth.csv", "threads,batch,latency_ms\n1,1,12\n2,1,7\n");
  text = emulated;
  text.replace(text.find("load_s: 2.5"), 11,
               "truth: truth.csv, profile_error: 0.2, jitter_cv: 0.3, seed: 7");
  config = LoadConfig(Write("t.yaml", "models:\n" + text));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const EmulateConfig& t = config->models[0].emulate;
  EXPECT_EQ(t.truth, (std::filesystem::path(dir_) / "truth.csv").lexically_normal().string());
  EXPECT_NE(t.truth, t.profile);
  EXPECT_DOUBLE_EQ(t.profile_error, 0.2);
  EXPECT_DOUBLE_EQ(t.jitter_cv, 0.3);
  EXPECT_EQ(t.seed, 7);
  text.replace(text.find("truth.csv"), 9, "gone.csv");
  EXPECT_NE(error("models:\n" + text).find(":3: models[0].emulate.truth: cannot"),
            std::string::npos);
  text = emulated;
  text.replace(text.find("load_s: 2.5"), 11, "profile_error: 1");
  EXPECT_EQ(error("models:\n" + text),
            ":3: models[0].emulate.profile_error: must be between 0.000000 and 0.900000");
  // What emulated runtimes cannot do: generation, layered top-ups.
  EXPECT_EQ(error("models:\n  - name: g\n    emulate: {profile: prof.csv}\n    generation: {}\n"
                  "    instances: [{count: 1, threads: 1, batch: 4}]\n"),
            ":3: models[0].emulate: emulated runtimes serve batch models, not generative ones");
  text = emulated;
  text.replace(text.find("    batching: {max_batch: 8}\n    instances: auto\n"), 48,
               "    batching: {mode: layered, latency_budget_ms: 100}\n"
               "    instances: [{count: 1, threads: 1, batch: 4}]\n");
  EXPECT_EQ(error("models:\n" + text),
            ":6: models[0].emulate: emulated runtimes do not run staged models' layered top-ups; "
            "use batching.mode: batched");
}

// `profile:` a profile measured on another node, for `instances: auto` only.
TEST_F(ConfigFileTest, ShippedProfileForAutoInstances) {
  Write("prof.csv", "threads,batch,latency_ms\n1,1,10\n2,1,6\n");
  Write("empty.csv", "threads,batch,latency_ms\n");
  const std::string model =
      "models:\n"                                                   // 1
      "  - name: m\n"                                               // 2
      "    path: m.pt\n"                                            // 3
      "    inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"   // 4
      "    outputs: [{name: y, datatype: FP32, shape: [-1, 1]}]\n"  // 5
      "    batching: {max_batch: 8}\n"                              // 6
      "    instances: auto\n";                                      // 7
  auto config = LoadConfig(Write("p.yaml", model + "    profile: prof.csv\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].profile,
            (std::filesystem::path(dir_) / "prof.csv").lexically_normal().string());
  EXPECT_TRUE(Parse(OneModel("    batching: {max_batch: 8}\n", "auto"))->models[0].profile.empty());

  auto error = [&](const std::string& text) { return LoadError(text); };
  EXPECT_NE(error(model + "    profile: absent.csv\n").find(":8: models[0].profile: cannot"),
            std::string::npos);
  EXPECT_NE(error(model + "    profile: empty.csv\n").find("profile has no data rows"),
            std::string::npos);
  std::string text = model;
  text.replace(text.find("auto"), 4, "[{count: 1, threads: 1, batch: 4}]");
  EXPECT_EQ(error(text + "    profile: prof.csv\n"),
            ":8: models[0].profile: is the profile `instances: auto` plans on; a static plan has "
            "none");
  text = model;
  text.replace(text.find("    path: m.pt"), 14, "    emulate: {profile: prof.csv}");
  EXPECT_EQ(error(text + "    profile: prof.csv\n"),
            ":8: models[0].profile: an emulated model's profile is emulate.profile");
}

}  // namespace
}  // namespace packrat

namespace packrat {
namespace {

TEST(RepositoryConfigTest, ARepositoryMakesModelsOptionalAndResolvesAgainstTheBaseDir) {
  auto config = ParseConfig("server: {model_repository: repo, model_control: explicit}\n", "x.yaml",
                            "/srv/conf");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->server.model_repository, "/srv/conf/repo");
  EXPECT_FALSE(config->server.load_all_models);
  EXPECT_TRUE(config->models.empty());
  auto bad = ParseConfig("server: {model_repository: repo, model_control: some}\n", "x.yaml", "/");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.yaml:1: server.model_control: must be 'all' or "
                                        "'explicit', not 'some'"),
            std::string::npos)
      << bad.status().message();
  auto none = ParseConfig("server: {io_threads: 2}\n", "x.yaml", "/");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("or set server.model_repository"), std::string::npos);
}

TEST(RepositoryConfigTest, AFolderIsOneModelNamedAfterIt) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "repo-config-test/resnet").lexically_normal();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/model.yaml") << "path: weights/m.pt\n"
                                        "inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"
                                        "outputs: [{name: y, datatype: FP32, shape: [-1, 1]}]\n"
                                        "instances: [{count: 1, threads: 1, batch: 4}]\n";
  auto m = LoadRepositoryModel(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "resnet");
  EXPECT_EQ(m->path, dir + "/weights/m.pt");

  std::ofstream(dir + "/model.yaml") << "name: other\npath: m.pt\n";
  auto named = LoadRepositoryModel(dir);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find(dir + "/model.yaml:1: name: is the folder's name"),
            std::string::npos)
      << named.status().message();
  std::ofstream(dir + "/model.yaml") << "path: m.pt\ninputs: [{name: x\n";
  auto broken = LoadRepositoryModel(dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(dir + "/model.yaml:"), std::string::npos);
  std::filesystem::remove(dir + "/model.yaml");
  EXPECT_EQ(LoadRepositoryModel(dir).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

}  // namespace
}  // namespace packrat
