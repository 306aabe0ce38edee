#include "common/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

namespace packrat {

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int StopSignals::Wait() {
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

void StopSignals::Request() { kill(getpid(), SIGUSR1); }

}  // namespace packrat
