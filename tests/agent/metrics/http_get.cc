#include "tests/agent/metrics/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace packrat::metrics::testing {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void ParseResponse(const std::string& raw, HttpGetResult* result) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || !raw.starts_with("HTTP/")) {
    result->error = "malformed response (" + std::to_string(raw.size()) + " bytes)";
    return;
  }
  const size_t line_end = raw.find("\r\n");
  const size_t space = raw.find(' ');
  if (space == std::string::npos || space > line_end) {
    result->error = "malformed status line";
    return;
  }
  result->status = std::atoi(raw.c_str() + space + 1);
  size_t pos = line_end + 2;
  while (pos < head_end) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string_view line(raw.data() + pos, eol - pos);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && Lower(line.substr(0, colon)) == "content-type") {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      result->content_type = std::string(value);
    }
    pos = eol + 2;
  }
  result->body = raw.substr(head_end + 4);
}

}  // namespace

HttpGetResult HttpGet(uint16_t port, const std::string& target, std::chrono::milliseconds timeout) {
  HttpGetResult result;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    result.error = std::string("socket: ") + std::strerror(errno);
    return result;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));  // also bounds connect()
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    result.error = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return result;
  }
  const std::string request =
      "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result.error = std::string("send: ") + std::strerror(errno);
      close(fd);
      return result;
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = std::string("recv: ") + std::strerror(errno);
      close(fd);
      return result;
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  ParseResponse(raw, &result);
  return result;
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace packrat::metrics::testing
