#include "shm/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace packrat::shm {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

FutexWaitResult FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                          std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return FutexWaitResult::kTimedOut;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  const long rc =
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
  if (rc == -1 && errno == ETIMEDOUT) return FutexWaitResult::kTimedOut;
  return FutexWaitResult::kWoken;  // woken, EAGAIN (value changed) or EINTR
}

void FutexWake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) { FutexWake(word, INT_MAX); }

}  // namespace packrat::shm
