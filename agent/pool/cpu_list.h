// The kernel's CPU list syntax ("0-3,8,10-11"), as in cpuset.cpus, sysfs and taskset.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat {

// Parses a list into ascending, distinct CPU numbers. Whitespace around the text (a trailing
// newline from sysfs) is ignored; an empty list is valid. InvalidArgument on anything else.
StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The shortest list for `cpus` (any order, duplicates allowed): "0-3,8".
std::string FormatCpuList(std::vector<int> cpus);

}  // namespace packrat
