// The flags the agent passes to both runtime binaries (packrat-runtime and the emulator's
// packrat-emulated-runtime), parsed the same way in each. Torch-free.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/datatype.h"
#include "common/status.h"

namespace packrat::runtime {

// What every runtime is told, whatever it runs (the agent's RuntimeCommand writes them).
struct CommonFlags {
  std::string segment;                  // --segment: the shared-memory segment to serve
  std::string name = "runtime";         // --name: "model/index", for logs
  int threads = 1;                      // --threads: intra-op threads
  pid_t agent_pid = 0;                  // --agent-pid: 0, no agent to outlive
  std::vector<int> cores;               // --cores: the CPUs of its cpuset
  std::vector<int64_t> warmup_batches;  // --warmup-batch, repeated: sizes to warm up at
  int warmup_iterations = 3;            // --warmup-iterations: passes per size
  int idle_spin_us = 100;               // --idle-spin-us: polling before sleeping on the ring
  // --idle-start-s: the runtime starts at idle priority (SCHED_IDLE) for at most this long;
  // 0: never. The agent starts a real runtime there and enforces it (common/idle_priority.h);
  // an emulated one emulates it all.
  double idle_start_s = 0;
  // --warmup while-idle: warm up only while at idle priority, else start cold (default:
  // always).
  bool warmup_while_idle = false;
};

// Reads `value` into `flags` where `flag` is one of CommonFlags'. False where it is not (a
// flag of the binary's own); InvalidArgument naming the flag for a bad value of one of them.
StatusOr<bool> ParseCommonFlag(const std::string& flag, const std::string& value,
                               CommonFlags* flags);

// "4,8,16" into {4, 8, 16}. InvalidArgument naming the text on an empty or non-integer item.
StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text);

// A tensor's per-row signature, "DTYPE:d1,d2,..." as --input and --output carry it (the
// dimensions may be absent: "FP32" or "FP32:" is a scalar per row). InvalidArgument naming
// `flag` and the value on an unknown datatype or a bad dimension list.
Status ParseRowSpec(const std::string& flag, const std::string& value, DataType* datatype,
                    std::vector<int64_t>* row_shape);

}  // namespace packrat::runtime
