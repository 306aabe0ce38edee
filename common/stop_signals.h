// Graceful-stop signals for the long-running binaries (packrat-agent, packrat-forward).
//
// Construct a StopSignals in main() before any thread starts: it blocks SIGINT and SIGTERM in
// the calling thread, so every thread created afterwards inherits the mask and only Wait()
// receives them. SIGPIPE is ignored (a closed peer is an error code, not a crash).
#pragma once

#include <signal.h>

namespace packrat {

class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT or SIGTERM arrives; returns the signal number.
  int Wait();

 private:
  sigset_t set_;
};

}  // namespace packrat
