#include "agent/config/config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/config/config_reader.h"

namespace packrat {

using config_internal::ParseModel;
using config_internal::ParseServer;
using config_internal::Reader;

int64_t ModelConfig::TargetBatch() const {
  if (auto_instances) return batching.max_batch;
  int64_t b = 0;
  for (const InstanceGroup& g : instances) b += static_cast<int64_t>(g.count) * g.batch;
  return b;
}

ModelSignature ModelConfig::Signature() const {
  ModelSignature s;
  s.name = name;
  s.inputs = inputs;
  s.outputs = outputs;
  s.max_batch = batching.max_batch;
  if (generation.enabled) {  // what /generate takes and gives
    s.inputs = {{"input_ids", DataType::kInt64, {-1}}};
    s.outputs = {{"output_ids", DataType::kInt64, {-1}}};
  }
  return s;
}

StatusOr<Endpoint> ParseEndpoint(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("'" + text + "' is not HOST:PORT");
  }
  Endpoint ep;
  ep.host = text.substr(0, colon);
  if (ep.host.size() >= 2 && ep.host.front() == '[' && ep.host.back() == ']') {
    ep.host = ep.host.substr(1, ep.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  const long v = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535) return InvalidArgument("bad port in '" + text + "'");
  ep.port = static_cast<uint16_t>(v);
  return ep;
}

StatusOr<Config> ParseConfig(const std::string& text, const std::string& source,
                             const std::string& base_dir) {
  Reader r(source);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  Config config;
  config.source = source;
  config.server.profile_dir = (std::filesystem::path(base_dir) / "profiles").string();
  try {
    RETURN_IF_ERROR(r.CheckKeys(root, "(top level)", {"server", "models"}));
    if (root["server"]) RETURN_IF_ERROR(ParseServer(r, root["server"], &config.server));
    if (std::filesystem::path(config.server.profile_dir).is_relative()) {
      config.server.profile_dir =
          (std::filesystem::path(base_dir) / config.server.profile_dir).lexically_normal().string();
    }
    std::string& token = config.server.management_token_file;
    if (!token.empty() && std::filesystem::path(token).is_relative()) {
      token = (std::filesystem::path(base_dir) / token).lexically_normal().string();
    }
    for (const auto& [key, socket] :
         {std::pair<std::string, std::string*>{"unix_socket", &config.server.unix_socket},
          {"grpc_unix_socket", &config.server.grpc_unix_socket}}) {
      if (!socket->empty() && std::filesystem::path(*socket).is_relative()) {
        *socket = (std::filesystem::path(base_dir) / *socket).lexically_normal().string();
      }
      if (socket->size() > kMaxUnixSocketPath) {
        return r.Error(root["server"][key], "server." + key,
                       "'" + *socket + "' is longer than " + std::to_string(kMaxUnixSocketPath) +
                           " bytes (the limit of a Unix socket address)");
      }
      if (!socket->empty()) {  // the agent makes the socket, not its folder
        config.named_paths.push_back({std::filesystem::path(*socket).parent_path().string(), true,
                                      r.Where(root["server"][key], "server." + key)});
      }
    }
    std::string& access_log = config.server.access_log_path;
    if (!access_log.empty() && access_log != "-" &&
        std::filesystem::path(access_log).is_relative()) {
      access_log = (std::filesystem::path(base_dir) / access_log).lexically_normal().string();
    }
    std::string& repository = config.server.model_repository;
    if (!repository.empty() && std::filesystem::path(repository).is_relative()) {
      repository = (std::filesystem::path(base_dir) / repository).lexically_normal().string();
    }
    if (!repository.empty()) {
      config.named_paths.push_back(
          {repository, true,
           r.Where(root["server"]["model_repository"], "server.model_repository")});
    }
    const YAML::Node models = root["models"];
    if (!repository.empty() && !models) return config;  // every model from the repository
    if (!models || !models.IsSequence() || models.size() == 0) {
      return r.Error(models ? models : root, "models",
                     repository.empty() ? "must be a non-empty list (or set "
                                          "server.model_repository)"
                                        : "must be a non-empty list when given");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < models.size(); ++i) {
      ModelConfig m;
      const std::string key = "models[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(ParseModel(r, models[i], key, base_dir, &m));
      if (!names.insert(m.name).second) {
        return r.Error(models[i]["name"], key + ".name", "duplicate model name '" + m.name + "'");
      }
      if (config.server.virtual_cpus > 0 && !m.emulate.enabled) {
        return r.Error(models[i], key,
                       "is not emulated, and a virtual node (server.virtual_cpus) serves emulated "
                       "models only: add `emulate: {profile: FILE.csv}`");
      }
      if (!m.emulate.enabled) {
        config.named_paths.push_back({m.path, false, r.Where(models[i]["path"], key + ".path")});
      }
      config.models.push_back(std::move(m));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  return config;
}

StatusOr<ModelConfig> LoadRepositoryModel(const std::string& folder) {
  const std::filesystem::path dir = std::filesystem::absolute(folder).lexically_normal();
  const std::string file = (dir / "model.yaml").string();
  std::ifstream in(file);
  if (!in) return NotFound("no model.yaml in " + dir.string());
  std::stringstream text;
  text << in.rdbuf();
  Reader r(file);
  YAML::Node node;
  try {
    node = YAML::Load(text.str());
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(file + ": " + e.what());
  }
  const std::string name = dir.filename().string();
  ModelConfig m;
  try {
    if (!node.IsMap()) return r.Error(node, "(top level)", "must be a mapping of a model's keys");
    if (node["name"]) {
      return r.Error(node["name"], "name", "is the folder's name ('" + name + "'); remove it");
    }
    node["name"] = name;
    RETURN_IF_ERROR(ParseModel(r, node, "model", dir.string(), &m));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(file + ": " + e.what());
  }
  return m;
}

Status CheckNamedPath(const NamedPath& named) {
  std::error_code ec;
  if (named.folder && !std::filesystem::is_directory(named.path, ec)) {
    return InvalidArgument(named.where + ": '" + named.path + "' is not a folder");
  }
  if (!named.folder && !std::ifstream(named.path)) {
    return InvalidArgument(named.where + ": cannot read '" + named.path + "'");
  }
  return Status::Ok();
}

Status CheckNamedPaths(const Config& config) {
  for (const NamedPath& named : config.named_paths) RETURN_IF_ERROR(CheckNamedPath(named));
  return Status::Ok();
}

StatusOr<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const std::string base = std::filesystem::absolute(path).parent_path().string();
  return ParseConfig(text.str(), path, base);
}

}  // namespace packrat
