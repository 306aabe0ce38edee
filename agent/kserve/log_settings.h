// The logging extension of Triton's v2 protocol: the agent's log settings, read and changed at
// run time (GET and POST /v2/logging; gRPC LogSettings). The settings, by Triton's names:
//   log_file           string  always "": the agent logs to stderr, the container's log; any
//                              other file is refused
//   log_info           bool    INFO lines
//   log_warning        bool    WARNING lines
//   log_error          bool    ERROR lines
//   log_verbose_level  uint    0: no DEBUG lines; 1 or more: DEBUG lines (one verbose level)
//   log_format         string  "text" or "json" (server.log_format): fixed at start, since
//                              the runtimes it starts inherit it; only the current one is
//                              accepted
// A change applies to the agent process; runtimes already started keep their settings.
// Thread-safety: pure functions, except ApplyLogSettings (process-wide, from any thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace packrat {

using LogSettingValue = std::variant<bool, uint64_t, std::string>;
// Settings by name, in the order above.
using LogSettings = std::vector<std::pair<std::string, LogSettingValue>>;

// The settings in effect.
LogSettings CurrentLogSettings();

// Applies every setting in `change`, or none: kInvalidArgument naming the first setting that
// is unknown, of the wrong type, or a value the agent cannot take (see above).
Status ApplyLogSettings(const LogSettings& change);

// A POST /v2/logging body: a JSON object of settings (booleans, non-negative integers,
// strings). kInvalidArgument for malformed JSON or another value type; names are checked by
// ApplyLogSettings.
StatusOr<LogSettings> ParseLogSettingsJson(std::string_view body);

// The response body: a JSON object of `settings`.
std::string LogSettingsJson(const LogSettings& settings);

}  // namespace packrat
