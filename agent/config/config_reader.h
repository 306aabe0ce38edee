// Reading the agent's YAML config (config.h): a Reader that turns every problem into
// InvalidArgument "file:line: key: what", and the section parsers built on it. Internal to the
// config library (the only code that includes yaml-cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "common/status.h"

namespace packrat::config_internal {

// Reads one YAML document, turning every problem into InvalidArgument with "file:line: key:".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    return InvalidArgument(Where(node, key) + ": " + what);
  }
  // "source:line: key", as errors start.
  std::string Where(const YAML::Node& node, const std::string& key) const {
    std::ostringstream m;
    m << source_;
    if (node.IsDefined() && node.Mark().line >= 0) m << ':' << node.Mark().line + 1;
    m << ": " << key;
    return m.str();
  }

  Status CheckKeys(const YAML::Node& map, const std::string& key,
                   const std::set<std::string>& allowed) const {
    if (!map.IsMap()) return Error(map, key, "must be a mapping");
    for (const auto& kv : map) {
      const std::string name = kv.first.as<std::string>();
      if (allowed.count(name) == 0) return Error(kv.first, key + "." + name, "unknown key");
    }
    return Status::Ok();
  }

  template <typename T>
  Status Get(const YAML::Node& node, const std::string& key, T* out) const {
    try {
      *out = node.as<T>();
    } catch (const YAML::Exception&) {
      return Error(node, key, "has the wrong type");
    }
    return Status::Ok();
  }

  Status GetInt(const YAML::Node& node, const std::string& key, int64_t min, int64_t max,
                int64_t* out) const {
    if (!node.IsScalar()) return Error(node, key, "must be an integer");
    RETURN_IF_ERROR(Get(node, key, out));
    if (*out < min || *out > max) {
      return Error(node, key,
                   "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    return Status::Ok();
  }

  template <typename T>
  Status GetIntAs(const YAML::Node& node, const std::string& key, int64_t min, int64_t max,
                  T* out) const {
    int64_t v = 0;
    RETURN_IF_ERROR(GetInt(node, key, min, max, &v));
    *out = static_cast<T>(v);
    return Status::Ok();
  }

  Status GetDouble(const YAML::Node& node, const std::string& key, double min, double max,
                   double* out) const {
    if (!node.IsScalar()) return Error(node, key, "must be a number");
    RETURN_IF_ERROR(Get(node, key, out));
    if (!(*out >= min && *out <= max)) {
      return Error(node, key,
                   "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    return Status::Ok();
  }

  Status GetString(const YAML::Node& node, const std::string& key, std::string* out) const {
    if (!node.IsScalar()) return Error(node, key, "must be a string");
    return Get(node, key, out);
  }

 private:
  std::string source_;
};

// The keys each section accepts: the parsers refuse any other, and WriteConfig's test checks
// that it writes every one (config_writer.h).
inline const std::set<std::string> kServerKeys = {"http",
                                                  "management",
                                                  "metrics",
                                                  "io_threads",
                                                  "max_body_bytes",
                                                  "max_header_bytes",
                                                  "idle_timeout_s",
                                                  "runtime_path",
                                                  "shutdown_timeout_s",
                                                  "runtime_idle_spin_us",
                                                  "profile_dir",
                                                  "drain_delay_s",
                                                  "unix_socket",
                                                  "grpc_unix_socket",
                                                  "log_format",
                                                  "cgroups",
                                                  "read_timeout_s",
                                                  "max_connections",
                                                  "management_token_file",
                                                  "model_repository",
                                                  "model_control",
                                                  "access_log",
                                                  "access_log_path",
                                                  "node_partition",
                                                  "partition_interval_ms",
                                                  "grpc",
                                                  "grpc_max_message_bytes",
                                                  "grpc_max_concurrent_streams",
                                                  "virtual_cpus",
                                                  "virtual_cpus_per_socket",
                                                  "strict_readiness",
                                                  "shared_memory"};
inline const std::set<std::string> kSharedMemoryKeys = {"key_prefix", "dir"};
inline const std::set<std::string> kModelKeys = {"name",
                                                 "path",
                                                 "inputs",
                                                 "outputs",
                                                 "batching",
                                                 "instances",
                                                 "warmup_iterations",
                                                 "startup_timeout_s",
                                                 "slice_timeout_s",
                                                 "auto_threads",
                                                 "reconfiguration",
                                                 "optimize",
                                                 "accuracy",
                                                 "generation",
                                                 "emulate",
                                                 "min_threads",
                                                 "weight",
                                                 "profile"};
inline const std::set<std::string> kTensorKeys = {"name", "datatype", "shape"};
inline const std::set<std::string> kInstanceKeys = {"count", "threads", "batch"};
inline const std::set<std::string> kGenerationKeys = {"refill", "max_tokens", "default_max_tokens",
                                                      "max_prompt_tokens"};
inline const std::set<std::string> kBatchingKeys = {"mode",
                                                    "latency_budget_ms",
                                                    "profile_repeats",
                                                    "max_batch",
                                                    "max_delay_us",
                                                    "max_inflight_batches",
                                                    "max_queue_rows",
                                                    "timeout_ms",
                                                    "max_batch_latency_ms",
                                                    "variable_tensor_bytes",
                                                    "p99_target_ms"};
inline const std::set<std::string> kOptimizeKeys = {"precision", "memory_format", "freeze",
                                                    "allow_emulated_bf16"};
inline const std::set<std::string> kAccuracyKeys = {"samples", "max_rel_error",
                                                    "min_top1_agreement", "strict"};
inline const std::set<std::string> kReconfigurationKeys = {
    "adaptive",           "sample_period_ms",    "drain_timeout_s", "max_utilization",
    "overload_window_ms", "scale_down_delay_ms", "slowdown_floor",  "skip_warmup_on_busy_cpus",
    "parked_runtimes",    "min_capacity",        "idle_start_s"};
// Keys of `reconfiguration:` that are settings no more, and what stands in their place: a config
// that still names one is refused with this reason, not read as something else.
inline const std::map<std::string, std::string_view> kRetiredReconfigurationKeys = {
    {"alpha", "the estimator's EWMA weight is 0.2"},
    {"window", "the estimator's window is 50 samples of sample_period_ms"},
    {"timeout_ms", "the estimator decides every 100 samples of sample_period_ms"},
    {"restart_margin", "a plan on the serving runtimes is kept within 10% of a new one's"},
    {"plan_at_rate", "where B stays, the plan for B at the arriving rate is always weighed"},
    {"burst_reserve_ms", "5% of batching.max_batch_latency_ms"}};
inline const std::set<std::string> kEmulateKeys = {
    "profile", "load_s", "neighbour_slowdown", "truth", "profile_error", "jitter_cv", "seed"};

// `server:` (server_config.cc).
Status ParseServer(const Reader& r, const YAML::Node& node, ServerConfig* s);
// One `models[]` entry at `key` ("models[3]"); relative paths resolve against `base_dir`
// (model_config.cc).
Status ParseModel(const Reader& r, const YAML::Node& node, const std::string& key,
                  const std::string& base_dir, ModelConfig* m);

}  // namespace packrat::config_internal
