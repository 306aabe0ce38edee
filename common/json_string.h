// JSON string literals: the one escaper of the project (KServe bodies, management answers, log
// lines), so every JSON the agent writes quotes text alike.
#pragma once

#include <string>
#include <string_view>

namespace packrat {

// Appends `s` as a JSON string literal (with quotes and escapes) to `out`. Control characters
// are escaped; valid UTF-8 passes through and each byte of an invalid sequence becomes U+FFFD,
// so the output is always valid JSON.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace packrat
