#include "tests/support/raw_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace packrat::testing {

RawConnection::RawConnection(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

RawConnection::~RawConnection() { close(fd_); }

bool RawConnection::Send(const std::string& bytes) {
  return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

template <typename Done>
std::pair<std::string, bool> RawConnection::Read(std::chrono::milliseconds timeout, Done done) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return {got, true};
    got.append(buf, static_cast<size_t>(n));
  }
  return {got, false};
}

std::string RawConnection::ReadUntil(const std::string& end, std::chrono::milliseconds timeout) {
  return Read(timeout, [&](const std::string& got) { return got.find(end) != std::string::npos; })
      .first;
}

std::pair<std::string, bool> RawConnection::ReadUntilClosed(std::chrono::milliseconds timeout) {
  return Read(timeout, [](const std::string&) { return false; });
}

}  // namespace packrat::testing
