// Starting one packrat-runtime process on a fresh shared-memory segment: what every kind of
// instance (batches: RuntimeInstance; generation: DecodeInstance) does the same way.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

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
};

struct RuntimeProcess {
  std::unique_ptr<shm::Segment> segment;
  pid_t pid = 0;
  std::string load_report;  // the runtime's one-line report (SegmentHeader::info)
};

// Creates the segment, launches the runtime and blocks until it reports ready. Errors carry the
// runtime's own reason (kFailedPrecondition: it could not load; kUnavailable: it exited;
// kDeadlineExceeded: not ready in time, killed).
StatusOr<RuntimeProcess> StartRuntimeProcess(const RuntimeProcessOptions& options,
                                             ProcessLauncher* launcher);

}  // namespace packrat
