// Writing a whole file so that readers never see it half-written: the text goes to a temporary
// file beside it, is flushed to disk, and is renamed over `path` in one step.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace packrat {

// kInternal (naming the file and the OS error) if any step fails; the temporary is removed.
Status WriteFileAtomically(const std::string& path, std::string_view content);

}  // namespace packrat
