// A tiny HTTP server on 127.0.0.1 (port 0, so tests never collide) that serves a metrics page at
// GET /metrics, standing in for the agent's metrics listener so that a real Prometheus can scrape
// a MetricsRegistry. One connection at a time on its own thread; every answer closes the
// connection.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace packrat::metrics::testing {

class MetricsHttpServer {
 public:
  // Binds and starts serving `render()` (called once per scrape, on the server thread). Returns
  // nullptr and sets `error` on failure.
  static std::unique_ptr<MetricsHttpServer> Start(std::function<std::string()> render,
                                                  std::string* error);
  ~MetricsHttpServer();  // stops accepting and joins the thread

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  uint16_t port() const { return port_; }
  // Blocks until `n` pages have been served or `timeout` passed; true in the first case.
  bool WaitForScrapes(uint64_t n, std::chrono::milliseconds timeout);
  uint64_t scrapes() const;

 private:
  MetricsHttpServer(int listen_fd, int stop_fd, uint16_t port, std::function<std::string()> render);
  void Serve();
  void HandleConnection(int fd);

  const int listen_fd_;
  const int stop_fd_;  // an eventfd written to stop Serve()
  const uint16_t port_;
  const std::function<std::string()> render_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t scrapes_ = 0;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace packrat::metrics::testing
