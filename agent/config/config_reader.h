// Reading the agent's YAML config (config.h): a Reader that turns every problem into
// InvalidArgument "file:line: key: what", and the section parsers built on it. Internal to the
// config library (the only code that includes yaml-cpp).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <sstream>
#include <string>

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

// `server:` (server_config.cc).
Status ParseServer(const Reader& r, const YAML::Node& node, ServerConfig* s);
// One `models[]` entry at `key` ("models[3]"); relative paths resolve against `base_dir`
// (model_config.cc).
Status ParseModel(const Reader& r, const YAML::Node& node, const std::string& key,
                  const std::string& base_dir, ModelConfig* m);

}  // namespace packrat::config_internal
