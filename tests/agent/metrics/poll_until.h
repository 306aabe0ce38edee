// Bounded waiting for a condition that has no wake-up to wait on (another process' HTTP API):
// re-checks at an interval, blocking in poll(2) on a timerfd between checks, never sleeping.
#pragma once

#include <chrono>
#include <functional>

namespace packrat::metrics::testing {

// Evaluates `done` until it returns true (then returns true) or `timeout` has passed since the
// call (then returns false); waits `interval` between evaluations.
bool PollUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval = std::chrono::milliseconds(100));

}  // namespace packrat::metrics::testing
