#include "agent/pool/runtime_process.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "common/idle_priority.h"
#include "common/logging.h"
#include "common/starvation_watch.h"
#include "shm/futex.h"

namespace packrat {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(200);
// How often an idle start's limit and CPU time are looked at.
constexpr auto kIdleLookInterval = std::chrono::milliseconds(100);
std::atomic<uint64_t> g_segment_counter{0};

}  // namespace

StatusOr<RuntimeProcess> StartRuntimeProcess(const RuntimeProcessOptions& options,
                                             ProcessLauncher* launcher) {
  const std::string name = shm::Segment::MakeName(
      getpid(), options.segment_tag + "." + std::to_string(g_segment_counter.fetch_add(1)));
  RuntimeProcess p;
  ASSIGN_OR_RETURN(p.segment, shm::Segment::Create(name, options.segment));
  for (uint32_t slot = 0; options.back_input_slabs && slot < p.segment->num_slots(); ++slot) {
    RETURN_IF_ERROR(p.segment->BackInput(slot, p.segment->input_capacity()));
  }
  LaunchSpec spec = options.spec;
  spec.args.insert(spec.args.begin(), {"--segment", name});
  ASSIGN_OR_RETURN(p.pid, launcher->Launch(spec));
  const auto launched = std::chrono::steady_clock::now();
  const auto deadline = launched + options.startup_timeout;
  std::atomic<uint32_t>* state = &p.segment->header()->state;
  // An idle start: until the runtime is ready, its limit passes or it is starved.
  bool idle = spec.idle_priority;
  if (idle) p.start_priority = "idle";
  // Its progress for the starvation watch: CPU time, and the time it was not runnable (I/O).
  StarvationWatch starvation(launched);
  std::optional<SchedSample> last = ReadSchedSample(p.pid);
  auto last_at = launched;
  std::chrono::nanoseconds progress{0};
  while (true) {
    const uint32_t s = state->load(std::memory_order_acquire);
    if (s == static_cast<uint32_t>(shm::RuntimeState::kReady)) {
      // The runtime moved itself back; where it could not (a capability the agent has and
      // its exec dropped), the agent does: a runtime never serves at idle priority.
      if (spec.idle_priority) {
        if (Status moved = LeaveIdlePriority(p.pid); !moved.ok()) {
          PACKRAT_LOG(WARNING) << "runtime " << options.label << ": " << moved.message();
        }
      }
      break;
    }
    if (s == static_cast<uint32_t>(shm::RuntimeState::kFailed)) {
      // A runtime exits after reporting its failure; one that hangs on the way out is killed,
      // so that no process outlives the failed start.
      if (!launcher->Wait(p.pid, std::chrono::seconds(5))) {
        launcher->Signal(p.pid, SIGKILL);
        launcher->Wait(p.pid, std::chrono::seconds(5));
      }
      return FailedPrecondition("runtime " + options.label +
                                " failed to start: " + p.segment->ErrorText());
    }
    if (auto exit = launcher->Poll(p.pid)) {
      return Unavailable("runtime " + options.label + " exited during start-up (" + *exit + ")" +
                         (p.segment->ErrorText().empty() ? "" : ": " + p.segment->ErrorText()));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      launcher->Signal(p.pid, SIGKILL);
      launcher->Wait(p.pid, std::chrono::seconds(5));
      return DeadlineExceeded("runtime " + options.label + " was not ready within " +
                              std::to_string(options.startup_timeout.count()) + " s");
    }
    if (idle) {
      const auto now = std::chrono::steady_clock::now();
      const std::optional<SchedSample> sample = ReadSchedSample(p.pid);
      if (sample && last) {
        progress += sample->cpu - last->cpu;
        if (!sample->runnable || !last->runnable) progress += now - last_at;
      }
      last = sample;
      last_at = now;
      const bool starved = starvation.Starved(now, progress);
      const char* why = nullptr;
      if (now - launched >= options.idle_limit) {
        why = "limit";
      } else if (starved) {
        why = "starved";
      }
      if (why != nullptr) {
        idle = false;
        p.start_priority = std::string("idle-until-") + why;
        const Status moved = LeaveIdlePriority(p.pid);
        PACKRAT_LOG(INFO) << "runtime " << options.label << " leaves idle priority ("
                          << (why[0] == 'l' ? "its limit" : "starved") << ")"
                          << (moved.ok() ? "" : ": " + moved.message());
      }
    }
    shm::FutexWait(state, s, idle ? kIdleLookInterval : kPollInterval);
  }
  p.load_report = p.segment->InfoText();
  return p;
}

void RunCompletionLoop(shm::Segment* segment, ProcessLauncher* launcher, pid_t pid,
                       const std::string& label, std::chrono::milliseconds poll,
                       const CompletionLoopHooks& hooks) {
  shm::CompletionMessage msg;
  while (true) {
    const Status s = segment->completions().Pop(&msg, poll);
    if (s.ok()) {
      hooks.handle(msg);
      continue;
    }
    if (s.code() != StatusCode::kDeadlineExceeded) return;  // ring closed by Stop()
    if (!hooks.watched()) continue;
    std::string why;
    if (auto exit = launcher->Poll(pid)) {
      why = label + " exited (" + *exit + ")";
    } else if (std::string hung = hooks.kill_if_hung(); !hung.empty()) {
      PACKRAT_LOG(ERROR) << label << " (pid " << pid << ") " << hung << "; killed it";
      if (!launcher->Wait(pid, std::chrono::seconds(5))) continue;  // reaped at the next poll
      why = label + " " + hung + " and was killed";
    } else {
      continue;
    }
    // What it finished before it went is delivered, not failed or retried: it may have pushed
    // messages since the Pop above timed out.
    while (segment->completions().TryPop(&msg)) hooks.handle(msg);
    hooks.dead(why);
  }
}

std::string KillIfOverdue(const HangWatch& watch, HangWatch::Clock::time_point now,
                          ProcessLauncher* launcher, pid_t pid, const std::string& work) {
  const auto silent = watch.Overdue(now);
  if (!silent) return "";
  launcher->Signal(pid, SIGKILL);
  return "reported nothing for " + std::to_string(silent->count()) + " ms with " + work +
         " (slice_timeout_s)";
}

}  // namespace packrat
