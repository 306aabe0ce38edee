// Starting one packrat-runtime process on a fresh shared-memory segment: what every kind of
// instance (batches: RuntimeInstance; generation: DecodeInstance) does the same way.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "agent/pool/hang_watch.h"
#include "agent/pool/process_launcher.h"
#include "common/status.h"
#include "shm/segment.h"

namespace packrat {

struct RuntimeProcessOptions {
  std::string label;        // "model/g1.0": for logs and errors
  std::string segment_tag;  // the segment is "packrat.<agent pid>.<tag>.<counter>"
  shm::SegmentOptions segment;
  // The process: path, arguments (--segment NAME is added), cores, cgroup.
  LaunchSpec spec;
  std::chrono::seconds startup_timeout{300};
  // Back every input slab with memory before the launch (Segment::Reserve): for small slabs
  // that are written whole. Otherwise the instance backs what it writes as it goes.
  bool back_input_slabs = false;
  // With spec.idle_priority: the longest the runtime may stay at idle priority, from its
  // launch; it is moved back earlier once starved (StarvationWatch on its CPU time), and moves
  // back itself once ready.
  std::chrono::milliseconds idle_limit{0};
};

struct RuntimeProcess {
  std::unique_ptr<shm::Segment> segment;
  pid_t pid = 0;
  std::string load_report;  // the runtime's one-line report (SegmentHeader::info)
  // With spec.idle_priority: "idle" (ready there), "idle-until-limit" or "idle-until-starved"
  // (moved back by the agent first); "" otherwise.
  std::string start_priority;
};

// Creates the segment, launches the runtime and blocks until it reports ready. Errors carry the
// runtime's own reason (kFailedPrecondition: it could not load; kUnavailable: it exited;
// kDeadlineExceeded: not ready in time, killed).
StatusOr<RuntimeProcess> StartRuntimeProcess(const RuntimeProcessOptions& options,
                                             ProcessLauncher* launcher);

// What an instance's completion thread needs from its owner (RunCompletionLoop).
struct CompletionLoopHooks {
  // Handles one message the runtime pushed.
  std::function<void(const shm::CompletionMessage&)> handle;
  // Whether the runtime is still watched: neither stopped nor dead. Takes the owner's lock.
  std::function<bool()> watched;
  // If the runtime has work and has been silent for longer than it is allowed, SIGKILLs it and
  // returns why (KillIfOverdue); else "". Signals under the owner's lock, so never after Stop()
  // took the process over.
  std::function<std::string()> kill_if_hung;
  // The runtime is gone: called once, after every message it pushed before it went was handled
  // (only unfinished work is left to fail or retry).
  std::function<void(const std::string& why)> dead;
};

// The completion thread of an instance (RuntimeInstance, DecodeInstance): hands every message
// of `segment`'s completion ring to hooks.handle until the ring is closed (Stop), and whenever
// none came for `poll` while the runtime is watched, checks the process: one that exited, or
// that hung and was killed (and reaped), is dead. `label` names it in the reason. Blocks.
void RunCompletionLoop(shm::Segment* segment, ProcessLauncher* launcher, pid_t pid,
                       const std::string& label, std::chrono::milliseconds poll,
                       const CompletionLoopHooks& hooks);

// For CompletionLoopHooks::kill_if_hung, under the owner's lock, for a runtime with `work`
// ("3 row(s) to compute"): SIGKILLs `pid` if `watch` says its silence outlasted its allowance at
// `now`, and returns why; else "".
std::string KillIfOverdue(const HangWatch& watch, HangWatch::Clock::time_point now,
                          ProcessLauncher* launcher, pid_t pid, const std::string& work);

}  // namespace packrat
