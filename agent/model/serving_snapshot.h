// What a served model shows of its instance sets and its autoscaling (the management API's
// GET /v2/models/{m}/config): plain data, copied under the owners' locks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/model/model_controller.h"
#include "agent/planning/autoscaler.h"
#include "agent/planning/instance_group.h"
#include "agent/planning/optimizer.h"

namespace packrat {

struct WorkerInfo {
  pid_t pid = 0;
  std::vector<int> cpus;
  int threads = 0;
  int64_t batch = 0;
  int64_t capacity = 0;  // the most rows of one slice (a decoder: its decode slots)
  uint64_t generation = 0;
  bool draining = false;  // in an old set that is finishing its batches
  bool alive = false;
  bool started_cold = false;  // started without warm-up (its CPUs still served another set)
  // How it loaded (the load report's start_priority): "idle", "idle-until-limit" or "normal"
  // where an idle start was asked for (its CPUs still served another set), else "".
  std::string start_priority;
  // Its cpuset cgroup's directory; empty where it is pinned by sched_setaffinity only.
  std::string cgroup;
};

struct ServingSnapshot {
  uint64_t generation = 0;
  int64_t batch = 0;          // B of the serving set
  int64_t backlog_batch = 0;  // the most rows of a batch cut from a backlog (>= batch)
  std::vector<InstanceGroup> groups;
  std::optional<Plan> plan;
  std::vector<WorkerInfo> workers;  // serving set first, then draining ones
  std::vector<WorkerInfo> parked;   // idle runtimes of earlier sets, oldest first
  double ewma = 0;                  // the estimator's moving average of the load
  int64_t estimate = 0;             // its power-of-two estimate
  bool adaptive = false;            // whether its decisions reconfigure
  int thread_budget = 0;            // T; 0 = unknown (no allocator)
  // The autoscaler's last hold (nullopt: none yet) and its recent moves, oldest first.
  std::optional<Reason> last_hold;
  std::vector<MoveRecord> moves;
  uint64_t revision = 0;  // counts the changes of all the above (not of the estimator's figures)
};

}  // namespace packrat
