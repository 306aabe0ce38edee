// When a runtime that has work last showed progress, and whether its silence has outlasted what
// it is allowed (the slice_timeout_s watchdog of RuntimeInstance and DecodeInstance).
//
// A runtime is allowed `timeout` of silence while it has work; until its first report also the
// start-up allowance, since it may still be optimising the model for the shapes it sees (a
// replacement may start without warm-up). Not thread-safe: the owner guards it with its lock.
#pragma once

#include <chrono>
#include <optional>

namespace packrat {

class HangWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // A zero `timeout` never calls a runtime hung.
  HangWatch(std::chrono::milliseconds timeout, std::chrono::milliseconds startup_allowance)
      : timeout_(timeout), startup_allowance_(startup_allowance) {}

  // Work was handed to a runtime that had none: its silence counts from now.
  void Started(Clock::time_point now) { last_progress_ = now; }
  // The runtime reported something (a result, a question, an acceptance).
  void Reported(Clock::time_point now) {
    last_progress_ = now;
    reported_ = true;
  }
  // How long a runtime that has work has been silent, if longer than it is allowed.
  std::optional<std::chrono::milliseconds> Overdue(Clock::time_point now) const {
    if (timeout_.count() <= 0) return std::nullopt;
    const auto allowed = reported_ ? timeout_ : std::max(timeout_, startup_allowance_);
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_progress_);
    if (silent < allowed) return std::nullopt;
    return silent;
  }

 private:
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds startup_allowance_;
  Clock::time_point last_progress_;
  bool reported_ = false;
};

}  // namespace packrat
