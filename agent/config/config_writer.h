// The agent's config written back as YAML (`packrat-agent --check-config`): every key with the
// value the agent will use, defaults and derived values included, relative paths resolved.
#pragma once

#include <string>

#include "agent/config/config.h"

namespace packrat {

// The YAML of `config`: a file that ParseConfig reads back to the same config, and that
// WriteConfig writes again unchanged. Keys whose value means "not set" (an empty path, an
// absent section) are left out, as are the values the agent sets itself (the resolved kernel
// settings, an emulated model's node state). Never fails.
std::string WriteConfig(const Config& config);

}  // namespace packrat
