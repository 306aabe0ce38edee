// The `server:` section of the agent's config (config.h).
#include <algorithm>

#include "agent/config/config.h"
#include "agent/config/config_reader.h"

namespace packrat::config_internal {
namespace {

Status ParseEndpointNode(const Reader& r, const YAML::Node& node, const std::string& key,
                         Endpoint* out) {
  std::string text;
  RETURN_IF_ERROR(r.GetString(node, key, &text));
  auto ep = ParseEndpoint(text);
  if (!ep.ok()) return r.Error(node, key, ep.status().message());
  *out = *ep;
  return Status::Ok();
}

// `grpc: HOST:PORT`, or `grpc: off`.
Status ParseGrpcNode(const Reader& r, const YAML::Node& node, ServerConfig* s) {
  std::string text;
  RETURN_IF_ERROR(r.GetString(node, "server.grpc", &text));
  s->grpc_explicit = true;
  if (text == "off") {
    s->grpc_enabled = false;
    return Status::Ok();
  }
  auto ep = ParseEndpoint(text);
  if (!ep.ok()) return r.Error(node, "server.grpc", ep.status().message() + " (or off)");
  s->grpc = *ep;
  return Status::Ok();
}

// `shared_memory: on | off`, or `shared_memory: {key_prefix: P, dir: D}`.
Status ParseSharedMemoryNode(const Reader& r, const YAML::Node& node, ServerConfig* s) {
  constexpr char kKey[] = "server.shared_memory";
  if (node.IsMap()) {
    RETURN_IF_ERROR(r.CheckKeys(node, kKey, kSharedMemoryKeys));
    if (node["dir"]) {
      RETURN_IF_ERROR(r.GetString(node["dir"], "server.shared_memory.dir", &s->shared_memory.dir));
      if (s->shared_memory.dir.empty() || s->shared_memory.dir.front() != '/') {
        return r.Error(node["dir"], "server.shared_memory.dir", "must be an absolute path");
      }
    }
    if (node["key_prefix"]) {
      RETURN_IF_ERROR(r.GetString(node["key_prefix"], "server.shared_memory.key_prefix",
                                  &s->shared_memory.key_prefix));
      if (s->shared_memory.key_prefix.find('/') != std::string::npos) {
        return r.Error(node["key_prefix"], "server.shared_memory.key_prefix",
                       "an object name's start holds no '/' (the key's leading '/' is not part "
                       "of it)");
      }
    }
    return Status::Ok();
  }
  std::string text;
  RETURN_IF_ERROR(r.GetString(node, kKey, &text));
  if (text != "on" && text != "off") {
    return r.Error(node, kKey, "must be on, off or {key_prefix: ...}, not '" + text + "'");
  }
  s->shared_memory.enabled = text == "on";
  return Status::Ok();
}

}  // namespace

Status ParseServer(const Reader& r, const YAML::Node& node, ServerConfig* s) {
  RETURN_IF_ERROR(r.CheckKeys(node, "server", kServerKeys));
  if (node["http"]) RETURN_IF_ERROR(ParseEndpointNode(r, node["http"], "server.http", &s->http));
  if (node["management"]) {
    RETURN_IF_ERROR(ParseEndpointNode(r, node["management"], "server.management", &s->management));
  }
  if (node["metrics"]) {
    RETURN_IF_ERROR(ParseEndpointNode(r, node["metrics"], "server.metrics", &s->metrics));
  }
  if (node["grpc"]) RETURN_IF_ERROR(ParseGrpcNode(r, node["grpc"], s));
  if (node["shared_memory"]) {
    RETURN_IF_ERROR(ParseSharedMemoryNode(r, node["shared_memory"], s));
  }
  if (node["io_threads"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["io_threads"], "server.io_threads", 1, 256, &s->io_threads));
  }
  if (node["max_body_bytes"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["max_body_bytes"], "server.max_body_bytes", 1024,
                               int64_t{1} << 40, &s->max_body_bytes));
  }
  if (node["max_header_bytes"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["max_header_bytes"], "server.max_header_bytes", 1024,
                               int64_t{1} << 24, &s->max_header_bytes));
  }
  // gRPC takes the limit as an int.
  s->grpc_max_message_bytes = std::min<uint64_t>(s->max_body_bytes, INT32_MAX);
  if (node["grpc_max_message_bytes"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["grpc_max_message_bytes"], "server.grpc_max_message_bytes",
                               1024, INT32_MAX, &s->grpc_max_message_bytes));
  }
  if (node["grpc_max_concurrent_streams"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["grpc_max_concurrent_streams"],
                               "server.grpc_max_concurrent_streams", 1, 1 << 20,
                               &s->grpc_max_concurrent_streams));
  }
  if (node["idle_timeout_s"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["idle_timeout_s"], "server.idle_timeout_s", 1, 86400, &s->idle_timeout_s));
  }
  if (node["shutdown_timeout_s"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["shutdown_timeout_s"], "server.shutdown_timeout_s", 0, 3600,
                               &s->shutdown_timeout_s));
  }
  if (node["drain_delay_s"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["drain_delay_s"], "server.drain_delay_s", 0, 3600, &s->drain_delay_s));
  }
  if (node["read_timeout_s"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["read_timeout_s"], "server.read_timeout_s", 1, 86400, &s->read_timeout_s));
  }
  if (node["max_connections"]) {
    RETURN_IF_ERROR(r.GetInt(node["max_connections"], "server.max_connections", 1, 1 << 20,
                             &s->max_connections));
  }
  if (node["cgroups"]) RETURN_IF_ERROR(r.Get(node["cgroups"], "server.cgroups", &s->cgroups));
  if (node["strict_readiness"]) {
    RETURN_IF_ERROR(
        r.Get(node["strict_readiness"], "server.strict_readiness", &s->strict_readiness));
  }
  if (node["runtime_idle_spin_us"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["runtime_idle_spin_us"], "server.runtime_idle_spin_us", 0,
                               100'000, &s->runtime_idle_spin_us));
  }
  if (node["runtime_path"]) {
    RETURN_IF_ERROR(r.GetString(node["runtime_path"], "server.runtime_path", &s->runtime_path));
  }
  if (node["profile_dir"]) {
    RETURN_IF_ERROR(r.GetString(node["profile_dir"], "server.profile_dir", &s->profile_dir));
  }
  if (node["model_repository"]) {
    RETURN_IF_ERROR(
        r.GetString(node["model_repository"], "server.model_repository", &s->model_repository));
    if (s->model_repository.empty()) {
      return r.Error(node["model_repository"], "server.model_repository", "must not be empty");
    }
  }
  if (node["node_partition"]) {
    RETURN_IF_ERROR(r.Get(node["node_partition"], "server.node_partition", &s->node_partition));
  }
  if (node["partition_interval_ms"]) {
    RETURN_IF_ERROR(r.GetInt(node["partition_interval_ms"], "server.partition_interval_ms", 10,
                             3'600'000, &s->partition_interval_ms));
  }
  if (node["access_log"]) {
    RETURN_IF_ERROR(r.GetString(node["access_log"], "server.access_log", &s->access_log));
    if (s->access_log != "off" && s->access_log != "json" && s->access_log != "logfmt") {
      return r.Error(node["access_log"], "server.access_log",
                     "must be 'off', 'json' or 'logfmt', not '" + s->access_log + "'");
    }
  }
  if (node["access_log_path"]) {
    RETURN_IF_ERROR(
        r.GetString(node["access_log_path"], "server.access_log_path", &s->access_log_path));
  }
  if (node["model_control"]) {
    std::string mode;
    RETURN_IF_ERROR(r.GetString(node["model_control"], "server.model_control", &mode));
    if (mode != "all" && mode != "explicit") {
      return r.Error(node["model_control"], "server.model_control",
                     "must be 'all' or 'explicit', not '" + mode + "'");
    }
    s->load_all_models = mode == "all";
  }
  if (node["virtual_cpus"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["virtual_cpus"], "server.virtual_cpus", 1, 1024, &s->virtual_cpus));
  }
  if (node["virtual_cpus_per_socket"]) {
    if (!node["virtual_cpus"]) {
      return r.Error(node["virtual_cpus_per_socket"], "server.virtual_cpus_per_socket",
                     "needs server.virtual_cpus");
    }
    RETURN_IF_ERROR(r.GetIntAs(node["virtual_cpus_per_socket"], "server.virtual_cpus_per_socket", 1,
                               s->virtual_cpus, &s->virtual_cpus_per_socket));
  }
  if (node["management_token_file"]) {
    RETURN_IF_ERROR(r.GetString(node["management_token_file"], "server.management_token_file",
                                &s->management_token_file));
    if (s->management_token_file.empty()) {
      return r.Error(node["management_token_file"], "server.management_token_file",
                     "must not be empty");
    }
  }
  if (node["unix_socket"]) {
    RETURN_IF_ERROR(r.GetString(node["unix_socket"], "server.unix_socket", &s->unix_socket));
    // Its length is checked in ParseConfig, once relative paths are resolved.
    if (s->unix_socket.empty()) {
      return r.Error(node["unix_socket"], "server.unix_socket", "must not be empty");
    }
  }
  if (node["log_format"]) {
    std::string format;
    RETURN_IF_ERROR(r.GetString(node["log_format"], "server.log_format", &format));
    if (format != "text" && format != "json") {
      return r.Error(node["log_format"], "server.log_format", "must be text or json");
    }
    s->log_json = format == "json";
  }
  if (node["grpc_unix_socket"]) {
    RETURN_IF_ERROR(
        r.GetString(node["grpc_unix_socket"], "server.grpc_unix_socket", &s->grpc_unix_socket));
    if (s->grpc_unix_socket.empty()) {
      return r.Error(node["grpc_unix_socket"], "server.grpc_unix_socket", "must not be empty");
    }
    if (!s->grpc_enabled) {
      return r.Error(node["grpc_unix_socket"], "server.grpc_unix_socket",
                     "needs gRPC on (server.grpc is off)");
    }
  }
  return Status::Ok();
}

}  // namespace packrat::config_internal
