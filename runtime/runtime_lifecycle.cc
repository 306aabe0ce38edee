#include "runtime/runtime_lifecycle.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "common/logging.h"

namespace packrat::runtime {

StatusOr<std::unique_ptr<shm::Segment>> AttachToAgent(const std::string& name, pid_t agent_pid) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (agent_pid != 0 && getppid() != agent_pid) {
    return Unavailable("the agent (pid " + std::to_string(agent_pid) + ") is gone");
  }
  return shm::Segment::Open(name);
}

int FailStart(shm::Segment* segment, const Status& status) {
  PACKRAT_LOG(ERROR) << status.ToString();
  segment->Fail(status.ToString());
  return 1;
}

int ServeUntilStopped(shm::Segment* segment, const std::function<Status()>& serve) {
  segment->header()->runtime_pid.store(getpid(), std::memory_order_release);
  segment->SetState(shm::RuntimeState::kReady);
  const Status s = serve();
  segment->SetState(shm::RuntimeState::kStopped);
  if (!s.ok()) PACKRAT_LOG(WARNING) << "stopping: " << s.message();
  return 0;
}

}  // namespace packrat::runtime
