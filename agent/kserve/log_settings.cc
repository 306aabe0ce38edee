#include "agent/kserve/log_settings.h"

#include <simdjson.h>

#include "common/json_string.h"
#include "common/logging.h"

namespace packrat {
namespace {

std::string_view FormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

const char* TypeName(const LogSettingValue& value) {
  if (std::holds_alternative<bool>(value)) return "a boolean";
  if (std::holds_alternative<uint64_t>(value)) return "a number";
  return "a string";
}

Status WrongType(const std::string& name, const char* wanted, const LogSettingValue& value) {
  return InvalidArgument("log setting '" + name + "' must be " + wanted + ", not " +
                         TypeName(value));
}

}  // namespace

LogSettings CurrentLogSettings() {
  const LogLevels levels = CurrentLogLevels();
  return {
      {"log_file", std::string()},
      {"log_info", levels.info},
      {"log_warning", levels.warning},
      {"log_error", levels.error},
      {"log_verbose_level", uint64_t{levels.debug ? 1u : 0u}},
      {"log_format", std::string(FormatName(CurrentLogFormat()))},
  };
}

Status ApplyLogSettings(const LogSettings& change) {
  LogLevels levels = CurrentLogLevels();
  const std::string format(FormatName(CurrentLogFormat()));
  for (const auto& [name, value] : change) {
    bool* level = name == "log_info"      ? &levels.info
                  : name == "log_warning" ? &levels.warning
                  : name == "log_error"   ? &levels.error
                                          : nullptr;
    if (level != nullptr) {
      if (!std::holds_alternative<bool>(value)) return WrongType(name, "a boolean", value);
      *level = std::get<bool>(value);
    } else if (name == "log_verbose_level") {
      if (!std::holds_alternative<uint64_t>(value)) {
        return WrongType(name, "a non-negative integer", value);
      }
      levels.debug = std::get<uint64_t>(value) > 0;
    } else if (name == "log_file") {
      if (!std::holds_alternative<std::string>(value)) return WrongType(name, "a string", value);
      if (!std::get<std::string>(value).empty()) {
        return InvalidArgument(
            "log setting 'log_file' must be \"\": the agent logs to stderr (the container's "
            "log)");
      }
    } else if (name == "log_format") {
      if (!std::holds_alternative<std::string>(value)) return WrongType(name, "a string", value);
      if (std::get<std::string>(value) != format) {
        return InvalidArgument(
            "log setting 'log_format' is fixed at start (server.log_format: " + format + ")");
      }
    } else {
      return InvalidArgument("unknown log setting '" + name +
                             "' (log_file, log_info, log_warning, log_error, "
                             "log_verbose_level, log_format)");
    }
  }
  SetLogLevels(levels);
  return Status::Ok();
}

StatusOr<LogSettings> ParseLogSettingsJson(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto error = parser.parse(body.data(), body.size()).get(root);
      error != simdjson::SUCCESS) {
    return InvalidArgument("malformed JSON: " + std::string(simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return InvalidArgument("a log settings body must be a JSON object of settings");
  }
  LogSettings out;
  for (const auto field : object) {
    std::string name(field.key);
    const simdjson::dom::element v = field.value;
    bool b = false;
    uint64_t n = 0;
    std::string_view s;
    if (v.get_bool().get(b) == simdjson::SUCCESS) {
      out.emplace_back(std::move(name), b);
    } else if (v.get_uint64().get(n) == simdjson::SUCCESS) {
      out.emplace_back(std::move(name), n);
    } else if (v.get_string().get(s) == simdjson::SUCCESS) {
      out.emplace_back(std::move(name), std::string(s));
    } else {
      return InvalidArgument("log setting '" + name +
                             "' must be a boolean, a non-negative integer or a string");
    }
  }
  return out;
}

std::string LogSettingsJson(const LogSettings& settings) {
  std::string out = "{";
  for (const auto& [name, value] : settings) {
    if (out.size() > 1) out += ',';
    AppendJsonString(out, name);
    out += ':';
    if (const bool* b = std::get_if<bool>(&value)) {
      out += *b ? "true" : "false";
    } else if (const uint64_t* n = std::get_if<uint64_t>(&value)) {
      out += std::to_string(*n);
    } else {
      AppendJsonString(out, std::get<std::string>(value));
    }
  }
  out += '}';
  return out;
}

}  // namespace packrat
