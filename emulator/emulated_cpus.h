// An emulated runtime's computations on the node: each marks its CPUs busy in the node's
// shared state (shm/virtual_cpus.h), lasts its work at the speed the contention model gives
// (contention.h), re-evaluated whenever any runtime's busy counts change, and unmarks them.
//
// It sleeps, never spins: it waits on its own doorbell in the node (a futex rung only by
// changes of the counts of its CPUs, or of any CPU where a neighbour slowdown is set) until the
// computation's expected end or the next such change, so that a hundred emulated runtimes on
// two real cores keep their emulated times (docs/benchmarks.md, "Virtual node").
//
// Thread-safety: one computation at a time per object (a runtime computes one slice at a time).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "emulator/contention.h"
#include "emulator/slice_progress.h"
#include "common/starvation_watch.h"
#include "shm/virtual_cpus.h"

namespace packrat::emulator {

struct EmulatedCpusOptions {
  double neighbour_slowdown = 0;  // contention.h
  // How often a computation checks keep_going while nothing changes.
  std::chrono::milliseconds poll{200};
};

class EmulatedCpus {
 public:
  // Joins `node` (claims a holder slot for this process; null: no node, no contention: every
  // computation lasts its work). Owns the node mapping.
  static StatusOr<std::unique_ptr<EmulatedCpus>> Create(std::unique_ptr<shm::VirtualCpus> node,
                                                        EmulatedCpusOptions options);
  ~EmulatedCpus();  // frees the holder slot
  EmulatedCpus(const EmulatedCpus&) = delete;
  EmulatedCpus& operator=(const EmulatedCpus&) = delete;

  // Computes `work` (the time at speed 1) on `cpus`: blocks until it is done at the speed the
  // node allows, or until `keep_going` returns false (checked at every wake-up; then false is
  // returned and the work is abandoned). InvalidArgument for CPUs outside the node.
  // Until `idle_until` it computes at idle priority (contention.h): its CPUs are not counted
  // busy, and it advances only while they have no busy thread; from then on as usual. As a
  // real runtime.s start (common/idle_priority.h), idle priority also ends for good once the
  // idle computations of this object were starved (common/starvation_watch.h).
  StatusOr<bool> Compute(std::chrono::nanoseconds work, const std::vector<int>& cpus,
                         const std::function<bool()>& keep_going, SteadyTime idle_until = {});

  // Whether idle priority ended early: its computations were starved.
  bool idle_starved() const { return idle_starved_; }

  // The speed a computation on `cpus` would have now (1 without a node); for logs and tests.
  double RateNow(const std::vector<int>& cpus) const;
  // The same at idle priority (not counted busy itself).
  double IdleRateNow(const std::vector<int>& cpus) const;
  const shm::VirtualCpus* node() const { return node_.get(); }

 private:
  EmulatedCpus(std::unique_ptr<shm::VirtualCpus> node, int holder, EmulatedCpusOptions options)
      : node_(std::move(node)), holder_(holder), options_(options) {}

  // The part of Compute at idle priority: until `progress` finishes, `idle_until` passes or
  // `keep_going` fails (then false). Woken by every change of the node's counts.
  bool ComputeIdle(SliceProgress* progress, const std::vector<int>& cpus,
                   const std::function<bool()>& keep_going, SteadyTime idle_until);
  ContentionView ViewOf(const std::vector<int>& cpus) const;

  std::unique_ptr<shm::VirtualCpus> node_;  // null: no contention
  int holder_;
  EmulatedCpusOptions options_;
  // Idle-priority computations: when the first began, the work they did, and the verdict.
  std::optional<StarvationWatch> idle_watch_;
  std::chrono::nanoseconds idle_done_{0};
  bool idle_starved_ = false;
};

}  // namespace packrat::emulator
