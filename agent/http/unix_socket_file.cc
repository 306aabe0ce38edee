#include "agent/http/unix_socket_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/config/config.h"
#include "common/logging.h"

namespace packrat {
namespace {

// True if a process accepts connections on the Unix socket at `path` (or has a full backlog).
bool UnixSocketIsLive(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const bool live = rc == 0 || errno == EAGAIN || errno == EINPROGRESS;
  close(fd);
  return live;
}

}  // namespace

Status UnixSocketFile::Prepare(const std::string& path, const std::string& who) {
  if (path.size() > kMaxUnixSocketPath) {
    return InvalidArgument("Unix socket path '" + path + "' is longer than " +
                           std::to_string(kMaxUnixSocketPath) + " bytes");
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPrecondition("cannot listen on unix:" + path + ": not a socket");
  }
  if (UnixSocketIsLive(path)) {
    return Unavailable("cannot listen on unix:" + path + ": another process listens there");
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Unavailable("cannot remove the stale socket " + path + ": " + std::strerror(errno));
  }
  PACKRAT_LOG(INFO) << who << ": removed the stale socket " << path;
  return Status::Ok();
}

Status UnixSocketFile::Claim(const std::string& path) {
  path_ = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) id_ = {st.st_dev, st.st_ino};
  if (chmod(path.c_str(), 0666) != 0) {
    return Internal("cannot chmod 0666 " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

void UnixSocketFile::Remove() {
  if (!id_) return;
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && std::make_pair(st.st_dev, st.st_ino) == *id_) {
    unlink(path_.c_str());
  }
  id_.reset();
}

}  // namespace packrat
