#include "agent/config/config_writer.h"

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "common/datatype.h"

namespace packrat {
namespace {

// The shortest text that reads back as the same double.
std::string Number(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

std::string Address(const Endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

template <typename T>
void Key(YAML::Emitter& out, const char* key, const T& value) {
  out << YAML::Key << key << YAML::Value << value;
}
void Key(YAML::Emitter& out, const char* key, double value) {
  out << YAML::Key << key << YAML::Value << Number(value);
}
void Key(YAML::Emitter& out, const char* key, bool value) {
  out << YAML::Key << key << YAML::Value << (value ? "true" : "false");
}
// A string key only where it is set.
void Optional(YAML::Emitter& out, const char* key, const std::string& value) {
  if (!value.empty()) Key(out, key, value);
}

void WriteServer(YAML::Emitter& out, const ServerConfig& s) {
  out << YAML::Key << "server" << YAML::Value << YAML::BeginMap;
  Key(out, "http", Address(s.http));
  Key(out, "management", Address(s.management));
  Key(out, "metrics", Address(s.metrics));
  Key(out, "grpc", s.grpc_enabled ? Address(s.grpc) : std::string("off"));
  Optional(out, "unix_socket", s.unix_socket);
  Optional(out, "grpc_unix_socket", s.grpc_unix_socket);
  out << YAML::Key << "shared_memory" << YAML::Value;
  if (s.shared_memory.enabled) {
    out << YAML::Flow << YAML::BeginMap;
    Key(out, "key_prefix", s.shared_memory.key_prefix);
    Key(out, "dir", s.shared_memory.dir);
    out << YAML::EndMap;
  } else {
    out << "off";
  }
  Key(out, "io_threads", s.io_threads);
  Key(out, "max_body_bytes", s.max_body_bytes);
  Key(out, "max_header_bytes", s.max_header_bytes);
  Key(out, "grpc_max_message_bytes", s.grpc_max_message_bytes);
  Key(out, "grpc_max_concurrent_streams", s.grpc_max_concurrent_streams);
  Key(out, "idle_timeout_s", s.idle_timeout_s);
  Key(out, "read_timeout_s", s.read_timeout_s);
  Key(out, "max_connections", s.max_connections);
  Key(out, "shutdown_timeout_s", s.shutdown_timeout_s);
  Key(out, "drain_delay_s", s.drain_delay_s);
  Optional(out, "runtime_path", s.runtime_path);
  Key(out, "runtime_idle_spin_us", s.runtime_idle_spin_us);
  Key(out, "profile_dir", s.profile_dir);
  Key(out, "cgroups", s.cgroups);
  Key(out, "strict_readiness", s.strict_readiness);
  Optional(out, "management_token_file", s.management_token_file);
  Optional(out, "model_repository", s.model_repository);
  Key(out, "model_control", s.load_all_models ? "all" : "explicit");
  Key(out, "node_partition", s.node_partition);
  Key(out, "partition_interval_ms", s.partition_interval_ms);
  Key(out, "log_format", s.log_json ? "json" : "text");
  Key(out, "access_log", s.access_log);
  Optional(out, "access_log_path", s.access_log_path);
  if (s.virtual_cpus > 0) Key(out, "virtual_cpus", s.virtual_cpus);
  if (s.virtual_cpus_per_socket > 0) Key(out, "virtual_cpus_per_socket", s.virtual_cpus_per_socket);
  out << YAML::EndMap;
}

void WriteTensors(YAML::Emitter& out, const char* key, const std::vector<TensorSpec>& tensors) {
  out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
  for (const TensorSpec& t : tensors) {
    out << YAML::Flow << YAML::BeginMap;
    Key(out, "name", t.name);
    Key(out, "datatype", std::string(DataTypeName(t.datatype)));
    out << YAML::Key << "shape" << YAML::Value << YAML::Flow << t.shape;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void WriteBatching(YAML::Emitter& out, const BatchingConfig& b) {
  out << YAML::Key << "batching" << YAML::Value << YAML::BeginMap;
  const bool layered = b.mode == BatchingMode::kLayered;
  Key(out, "mode", layered ? "layered" : "batched");
  if (layered) {
    Key(out, "latency_budget_ms", b.latency_budget_ms);
    Key(out, "profile_repeats", b.profile_repeats);
  }
  Key(out, "max_batch", b.max_batch);
  Key(out, "max_delay_us", b.max_delay_us);
  Key(out, "max_inflight_batches", b.max_inflight_batches);
  Key(out, "max_queue_rows", b.max_queue_rows);
  Key(out, "timeout_ms", b.timeout_ms);
  Key(out, "max_batch_latency_ms", b.max_batch_latency_ms);
  if (b.p99_target_ms > 0) Key(out, "p99_target_ms", b.p99_target_ms);
  Key(out, "variable_tensor_bytes", b.variable_tensor_bytes);
  out << YAML::EndMap;
}

void WriteReconfiguration(YAML::Emitter& out, const ReconfigurationConfig& c) {
  out << YAML::Key << "reconfiguration" << YAML::Value << YAML::BeginMap;
  Key(out, "adaptive", c.adaptive);
  Key(out, "sample_period_ms", c.sample_period_ms);
  Key(out, "drain_timeout_s", c.drain_timeout_s);
  Key(out, "max_utilization", c.max_utilization);
  Key(out, "overload_window_ms", c.overload_window_ms);
  Key(out, "scale_down_delay_ms", c.scale_down_delay_ms);
  Key(out, "slowdown_floor", c.slowdown_floor);
  Key(out, "min_capacity", c.min_capacity);
  Key(out, "skip_warmup_on_busy_cpus", c.skip_warmup_on_busy_cpus);
  Key(out, "idle_start_s", c.idle_start_s);
  if (c.parked_runtimes == ReconfigurationConfig::kParkAuto) {
    Key(out, "parked_runtimes", "auto");
  } else {
    Key(out, "parked_runtimes", c.parked_runtimes);
  }
  out << YAML::EndMap;
}

void WriteModel(YAML::Emitter& out, const ModelConfig& m) {
  out << YAML::BeginMap;
  Key(out, "name", m.name);
  Optional(out, "path", m.path);
  if (m.generation.enabled) {
    const GenerationConfig& g = m.generation;
    out << YAML::Key << "generation" << YAML::Value << YAML::BeginMap;
    Key(out, "refill", g.refill);
    Key(out, "max_tokens", g.max_tokens);
    Key(out, "default_max_tokens", g.default_max_tokens);
    Key(out, "max_prompt_tokens", g.max_prompt_tokens);
    out << YAML::EndMap;
  } else {
    WriteTensors(out, "inputs", m.inputs);
    WriteTensors(out, "outputs", m.outputs);
  }
  WriteBatching(out, m.batching);
  out << YAML::Key << "instances" << YAML::Value;
  if (m.auto_instances) {
    out << "auto";
  } else {
    out << YAML::BeginSeq;
    for (const InstanceGroup& g : m.instances) {
      out << YAML::Flow << YAML::BeginMap;
      Key(out, "count", g.count);
      Key(out, "threads", g.threads);
      Key(out, "batch", g.batch);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  Optional(out, "profile", m.profile);
  if (m.auto_threads > 0) Key(out, "auto_threads", m.auto_threads);
  Key(out, "min_threads", m.min_threads);
  Key(out, "weight", m.weight);
  Key(out, "warmup_iterations", m.warmup_iterations);
  Key(out, "startup_timeout_s", m.startup_timeout_s);
  Key(out, "slice_timeout_s", m.slice_timeout_s);
  WriteReconfiguration(out, m.reconfiguration);
  if (!m.generation.enabled) {
    out << YAML::Key << "optimize" << YAML::Value << YAML::BeginMap;
    Key(out, "precision", m.optimize.precision);
    Key(out, "memory_format", m.optimize.memory_format);
    Key(out, "freeze", m.optimize.freeze);
    Key(out, "allow_emulated_bf16", m.optimize.allow_emulated_bf16);
    out << YAML::EndMap;
  }
  out << YAML::Key << "accuracy" << YAML::Value << YAML::BeginMap;
  Key(out, "samples", m.accuracy.samples);
  Key(out, "max_rel_error", m.accuracy.max_rel_error);
  Key(out, "min_top1_agreement", m.accuracy.min_top1_agreement);
  Key(out, "strict", m.accuracy.strict);
  out << YAML::EndMap;
  if (m.emulate.enabled) {
    const EmulateConfig& e = m.emulate;
    out << YAML::Key << "emulate" << YAML::Value << YAML::BeginMap;
    Key(out, "profile", e.profile);
    Optional(out, "truth", e.truth);
    Key(out, "load_s", e.load_s);
    Key(out, "neighbour_slowdown", e.neighbour_slowdown);
    Key(out, "profile_error", e.profile_error);
    Key(out, "jitter_cv", e.jitter_cv);
    Key(out, "seed", e.seed);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

}  // namespace

std::string WriteConfig(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  WriteServer(out, config.server);
  if (!config.models.empty()) {
    out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
    for (const ModelConfig& m : config.models) WriteModel(out, m);
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace packrat
