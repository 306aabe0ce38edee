// Graceful-stop signals for the long-running binaries (packrat-agent, packrat-forward).
//
// Construct a StopSignals in main() before any thread starts: it blocks SIGINT, SIGTERM and
// SIGUSR1 in the calling thread, so every thread created afterwards inherits the mask and only
// Wait() receives them. SIGPIPE is ignored (a closed peer is an error code, not a crash).
// SIGUSR1 is the process's own request to stop (Request()); from outside it stops gracefully
// too, where its default action would have killed the process.
#pragma once

#include <signal.h>

namespace packrat {

class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT, SIGTERM or SIGUSR1 arrives; returns the signal number.
  int Wait();
  // Makes Wait() return SIGUSR1. Thread-safe and async-signal-safe; never blocks.
  static void Request();

 private:
  sigset_t set_;
};

}  // namespace packrat
