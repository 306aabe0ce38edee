// ControlGate: the one authorisation check of every control path of the agent — the REST
// management API (ManagementHandler: plans, the partition, the repository routes) and the gRPC
// repository RPCs (InferenceService: RepositoryIndex, RepositoryModelLoad/Unload) — and of any
// control path added later. Inference, health and metadata are not control paths.
//
// With a token (server.management_token_file) a call passes only with "Bearer <token>" in its
// `authorization` (the HTTP header, or gRPC metadata of that name); without a token every call
// passes. Each path asks Admit() and answers what it returns in its own protocol: 401 with a
// JSON error and WWW-Authenticate over REST, UNAUTHENTICATED over gRPC.
//
// Thread-safety: immutable once built; Admit() from any thread. Copies share nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace packrat {

class ControlGate {
 public:
  // An open gate: every call passes.
  ControlGate() = default;
  // A gate that asks for `token` (not empty).
  explicit ControlGate(std::string token);

  // The gate of the token in `path`, its content without surrounding whitespace. NotFound if
  // the file cannot be read; InvalidArgument if it holds no token or every user may read it
  // (a token others on the host can read guards nothing: chmod 600, or a Secret's defaultMode
  // 0440). The token itself is never part of a message.
  static StatusOr<ControlGate> FromFile(const std::string& path);

  bool open() const { return token_.empty(); }
  // OK where the gate is open or `authorization` is "Bearer <token>"; otherwise
  // kUnauthenticated, saying whether the credential was missing or wrong.
  Status Admit(std::optional<std::string_view> authorization) const;

 private:
  std::string token_;
};

// Whether `authorization` is "Bearer <token>", in time independent of where they differ.
bool BearerMatches(std::string_view authorization, std::string_view token);

}  // namespace packrat
