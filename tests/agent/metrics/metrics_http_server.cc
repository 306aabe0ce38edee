#include "tests/agent/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "agent/metrics/agent_metrics.h"

namespace packrat::metrics::testing {
namespace {

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Response(int status, std::string_view reason, std::string_view content_type,
                     const std::string& body) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: " + std::string(content_type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

}  // namespace

std::unique_ptr<MetricsHttpServer> MetricsHttpServer::Start(std::function<std::string()> render,
                                                            std::string* error) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("bind/listen: ") + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    *error = std::string("eventfd: ") + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, stop_fd, ntohs(addr.sin_port), std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int stop_fd, uint16_t port,
                                     std::function<std::string()> render)
    : listen_fd_(listen_fd), stop_fd_(stop_fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(stop_fd_);
}

void MetricsHttpServer::Serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (true) {
    const int r = poll(fds, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (fds[1].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    close(conn);
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  timeval tv{};
  tv.tv_sec = 2;  // a client that never finishes its request cannot stall the server for long
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  // Request line: METHOD SP TARGET SP VERSION.
  const size_t sp1 = request.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : request.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) {
    SendAll(fd, Response(400, "Bad Request", "text/plain", "bad request\n"));
    return;
  }
  const std::string method = request.substr(0, sp1);
  std::string target = request.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (method != "GET" || target != "/metrics") {
    SendAll(fd, Response(404, "Not Found", "text/plain", "not found\n"));
    return;
  }
  SendAll(fd, Response(200, "OK", kPrometheusContentType, render_()));
  std::lock_guard<std::mutex> lock(mu_);
  ++scrapes_;
  cv_.notify_all();
}

bool MetricsHttpServer::WaitForScrapes(uint64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return scrapes_ >= n; });
}

uint64_t MetricsHttpServer::scrapes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scrapes_;
}

}  // namespace packrat::metrics::testing
