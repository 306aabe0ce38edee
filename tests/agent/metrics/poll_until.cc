#include "tests/agent/metrics/poll_until.h"

#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace packrat::metrics::testing {
namespace {

// Blocks until `interval` has elapsed, on a timerfd. Returns false if the timer failed.
bool WaitInterval(std::chrono::milliseconds interval) {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (fd < 0) return false;
  itimerspec spec{};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
  spec.it_value.tv_sec = ns / 1'000'000'000;
  spec.it_value.tv_nsec = ns % 1'000'000'000;
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  bool ok = timerfd_settime(fd, 0, &spec, nullptr) == 0;
  if (ok) {
    pollfd pfd{fd, POLLIN, 0};
    int r;
    do {
      r = poll(&pfd, 1, -1);
    } while (r < 0 && errno == EINTR);
    ok = r == 1;
  }
  close(fd);
  return ok;
}

}  // namespace

bool PollUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (!WaitInterval(std::min(interval, left))) return false;
  }
}

}  // namespace packrat::metrics::testing
