#include "agent/http/control_gate.h"

#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <fstream>
#include <sstream>

namespace packrat {

ControlGate::ControlGate(std::string token) : token_(std::move(token)) { assert(!token_.empty()); }

StatusOr<ControlGate> ControlGate::FromFile(const std::string& path) {
  std::ifstream in(path);
  struct stat st {};
  if (!in || stat(path.c_str(), &st) != 0) {
    return NotFound("cannot read the management token file '" + path + "'");
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return InvalidArgument("the management token file '" + path +
                           "' is readable by every user: chmod 600 it (a Secret: defaultMode "
                           "0440)");
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return InvalidArgument("the management token file '" + path + "' is empty");
  }
  token = token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  return ControlGate(std::move(token));
}

Status ControlGate::Admit(std::optional<std::string_view> authorization) const {
  if (open() || (authorization && BearerMatches(*authorization, token_))) return Status::Ok();
  return Unauthenticated(authorization ? "the bearer token is wrong"
                                       : "control calls need 'authorization: Bearer <token>' "
                                         "(server.management_token_file)");
}

bool BearerMatches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size() || authorization.substr(0, kScheme.size()) != kScheme) {
    return false;
  }
  const std::string_view given = authorization.substr(kScheme.size());
  // Every byte of the longer one is looked at whatever matched before; only the lengths'
  // equality leaks, which the token's length (not its content) decides.
  unsigned diff = given.size() == token.size() ? 0 : 1;
  const size_t n = std::max(given.size(), token.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? given[i] : 0;
    const unsigned char b = i < token.size() ? token[i] : 0;
    diff |= a ^ b;
  }
  return diff == 0;
}

}  // namespace packrat
