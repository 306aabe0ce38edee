// The runtimes of one plan ("generation") of a model, and the dispatcher that spreads batches
// over them. Plain data, owned by ServedModel; see served_model.h for the life cycle.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/batching/dispatcher.h"
#include "agent/planning/instance_group.h"
#include "agent/planning/optimizer.h"
#include "agent/pool/cpuset_controller.h"
#include "agent/pool/decode_instance.h"
#include "agent/pool/resource_allocator.h"
#include "agent/pool/runtime_instance.h"

namespace packrat {

// One runtime with what it holds. Shared by the sets it belongs to: an instance kept across a
// reconfiguration is in the old and the new set. Members are destroyed bottom-up: the process
// stops and is reaped, then its CPUs are released and its cgroup directory removed.
// A worker runs batches (`instance`) or, for a generative model, decodes sequences (`decoder`,
// `batch` being its share of the plan's sequences); exactly one of the two is set once started.
// `batch` is the b it was started (and warmed up) for; a set that keeps it may run it at
// another b up to capacity() (InstanceSet::batches).
struct Worker {
  std::unique_ptr<CpusetGroup> cgroup;  // null without a cgroup
  CpuLease lease;
  Placement placement;  // empty without an allocator
  int threads = 1;
  int64_t batch = 1;
  bool started_cold = false;  // without warm-up: its CPUs still served another set
  std::unique_ptr<RuntimeInstance> instance;
  std::unique_ptr<DecodeInstance> decoder;

  pid_t pid() const { return instance ? instance->pid() : decoder ? decoder->pid() : 0; }
  bool alive() const { return instance ? instance->alive() : decoder && decoder->alive(); }
  // The most rows a slice may carry, or the decoder's slots (its limit may be lower).
  int64_t capacity() const {
    return instance ? instance->batch_size() : decoder ? decoder->options().slots : batch;
  }
  std::string load_report() const {
    return instance ? instance->load_report() : decoder ? decoder->load_report() : "";
  }
  std::string start_priority() const { return instance ? instance->start_priority() : ""; }
  // Lets running work finish (up to `drain`), then stops the process.
  void Stop(std::chrono::milliseconds drain) {
    if (instance) instance->Stop(drain);
    if (decoder) decoder->Stop(drain);
  }
};

struct InstanceSet {
  uint64_t generation = 0;
  std::vector<InstanceGroup> groups;
  std::optional<Plan> plan;  // the optimizer's, when it made this one
  int64_t target_rows = 0;   // B = Σ count·batch
  // The most rows of one batch cut while more than B wait (BatchAggregator::Options::max_rows;
  // 0: B): for `instances: auto` batch models, where the profile says capacity stops growing
  // on these instances (BacklogBatch).
  int64_t backlog_rows = 0;
  std::vector<std::shared_ptr<Worker>> workers;
  std::vector<int64_t> batches;            // each worker's b in this plan, by position
  std::shared_ptr<Dispatcher> dispatcher;  // null for a generative model
};

}  // namespace packrat
