// UnixSocketFile: the file of a Unix socket a server listens on — the agent's REST socket
// (server.unix_socket) and its gRPC socket (server.grpc_unix_socket).
//
// Before binding, Prepare() makes the path free: a socket file nobody listens on (a crashed
// agent's) is removed; one another process listens on, or a file that is no socket, is an
// error. After binding, Claim() makes it 0666 (the sidecars in other pods run as any user) and
// remembers which file it bound, so that Remove() deletes that file only, never one a
// successor bound at the same path since.
//
// Thread-safety: one owner. Remove() is idempotent and runs from the destructor too.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>

#include "common/status.h"

namespace packrat {

class UnixSocketFile {
 public:
  UnixSocketFile() = default;
  ~UnixSocketFile() { Remove(); }
  UnixSocketFile(const UnixSocketFile&) = delete;
  UnixSocketFile& operator=(const UnixSocketFile&) = delete;

  // InvalidArgument for a path too long for a socket address; FailedPrecondition for a file
  // that is not a socket; Unavailable where another process listens there or a stale socket
  // cannot be removed. `who` names the server in the log line of a removal.
  static Status Prepare(const std::string& path, const std::string& who);
  // The socket is bound at `path`: chmod 0666 and remember the file (Internal on failure).
  Status Claim(const std::string& path);
  // Deletes the claimed file if it is still the one bound.
  void Remove();

 private:
  std::string path_;
  std::optional<std::pair<dev_t, ino_t>> id_;
};

}  // namespace packrat
