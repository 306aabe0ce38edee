// A raw TCP connection to 127.0.0.1, for bytes no HTTP client sends: clients that misbehave on
// purpose, and protocol steps a client library hides (an interim "100 Continue").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace packrat::testing {

class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // True if every byte was sent.
  bool Send(const std::string& bytes);
  // Reads until what arrived holds `end`, the server closes, or `timeout`; returns what arrived.
  std::string ReadUntil(const std::string& end, std::chrono::milliseconds timeout);
  // Reads until the server closes the connection or `timeout`; what arrived, and whether the
  // connection was closed.
  std::pair<std::string, bool> ReadUntilClosed(std::chrono::milliseconds timeout);

 private:
  // Reads until `done(got)`, a close or `timeout`.
  template <typename Done>
  std::pair<std::string, bool> Read(std::chrono::milliseconds timeout, Done done);

  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace packrat::testing
