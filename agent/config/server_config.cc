// The `server:` section of the agent's config (config.h).
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

}  // namespace

Status ParseServer(const Reader& r, const YAML::Node& node, ServerConfig* s) {
  RETURN_IF_ERROR(
      r.CheckKeys(node, "server",
                  {"http", "management", "metrics", "io_threads", "max_body_bytes",
                   "max_header_bytes", "idle_timeout_s", "runtime_path", "shutdown_timeout_s",
                   "runtime_idle_spin_us", "profile_dir", "drain_delay_s", "unix_socket", "cgroups",
                   "read_timeout_s", "max_connections", "management_token_file"}));
  if (node["http"]) RETURN_IF_ERROR(ParseEndpointNode(r, node["http"], "server.http", &s->http));
  if (node["management"]) {
    RETURN_IF_ERROR(ParseEndpointNode(r, node["management"], "server.management", &s->management));
  }
  if (node["metrics"]) {
    RETURN_IF_ERROR(ParseEndpointNode(r, node["metrics"], "server.metrics", &s->metrics));
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
  return Status::Ok();
}

}  // namespace packrat::config_internal
