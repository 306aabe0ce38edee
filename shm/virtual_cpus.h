// The shared state of a virtual node's CPUs (server.virtual_cpus, or emulated models on real
// CPU ids): how many emulated threads are busy on each CPU, so that emulated runtimes
// (emulator/, separate processes) slow each other down as real threads on shared cores do.
// Created by the agent, one per node; opened by every packrat-emulated-runtime it starts.
//
//   [VirtualCpusHeader][busy count of CPU 0 .. num_cpus-1 (u32 each)][HolderSlot × max_holders]
//
// Plain data at fixed offsets (computed from num_cpus and max_holders, both in the header), no
// pointers; a header with magic and version. Every runtime claims one holder slot for its life
// and records in it the CPUs it counts busy, so that the counts of a runtime killed mid-slice
// (hang watchdog, SIGKILL at shutdown) can be taken back by whoever claims a slot next.
//
// Invariants (between operations):
//   busy[c]   = the number of holder slots that are marked and whose mask has CPU c;
//   busy_cpus = the number of CPUs whose busy count is above 0;
//   generation grows (wrapping) after every change of the counts, and changed_ns is the
//   CLOCK_MONOTONIC time (std::chrono::steady_clock on Linux: one clock for every process) of
//   the latest change;
//   after a change of the counts of CPUs C, every other marked holder whose mask meets C, or
//   that watches every CPU, has had its doorbell rung (bumped, futex-woken) and its rung_ns
//   set to the change's time. A computing runtime sleeps on its own doorbell, so a change
//   wakes only the runtimes whose speed it may change (not all of them: with dozens of
//   runtimes on two real cores, waking all at every change cost more CPU than the emulation).
// A process killed between marking its slot and counting its CPUs (a few instructions) may
// leave counts off by one until the node is made again; counts never go below zero.
//
// Thread- and process-safety: every method may be called from any thread of any process that
// has the node open; a holder slot is used by the one process that claimed it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace boost::interprocess {
class mapped_region;
}

namespace packrat::shm {

inline constexpr uint64_t kVirtualCpusMagic = 0x5550435654415250ull;  // "PRATVCPU", little end.
inline constexpr uint32_t kVirtualCpusVersion = 1;
inline constexpr int kMaxVirtualCpus = 1024;

struct alignas(64) VirtualCpusHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t num_cpus;     // 1..kMaxVirtualCpus
  uint32_t max_holders;  // holder slots after the counts
  uint32_t reserved;
  uint64_t segment_size;
  alignas(64) std::atomic<uint32_t> generation;  // futex word: bumped after every change
  std::atomic<uint32_t> busy_cpus;
  std::atomic<int64_t> changed_ns;  // steady_clock time of the latest change, in ns
};

// One emulated runtime's claim on the node.
struct alignas(64) HolderSlot {
  std::atomic<int32_t> pid;             // 0: free; > 0: the owning process; -1: being reclaimed
  std::atomic<uint32_t> marked;         // 1 while the CPUs of `mask` are counted busy for it
  std::atomic<uint32_t> doorbell;       // futex word: rung when a change may concern it
  std::atomic<uint32_t> watch_all;      // 1: every change concerns it (busy neighbours slow it)
  std::atomic<int64_t> rung_ns;         // steady_clock time of the change that rang it last
  uint64_t mask[kMaxVirtualCpus / 64];  // written by the owner while unmarked
};

static_assert(std::is_standard_layout_v<VirtualCpusHeader>);
static_assert(std::is_standard_layout_v<HolderSlot>);
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(sizeof(HolderSlot) == 192);

class VirtualCpus {
 public:
  // A node of `num_cpus` CPUs (1..kMaxVirtualCpus) with room for `max_holders` runtimes at once
  // (0: four per CPU, at least 64). Fails if the name exists.
  static StatusOr<std::unique_ptr<VirtualCpus>> Create(const std::string& name, int num_cpus,
                                                       int max_holders = 0);
  // Opens a node made by Create and checks its header against the mapping.
  static StatusOr<std::unique_ptr<VirtualCpus>> Open(const std::string& name);
  ~VirtualCpus();  // the creator removes the name; an opener only unmaps
  VirtualCpus(const VirtualCpus&) = delete;
  VirtualCpus& operator=(const VirtualCpus&) = delete;

  const std::string& name() const { return name_; }
  int num_cpus() const { return num_cpus_; }

  // Claims a free holder slot for process `pid`, after taking back the slots of processes that
  // no longer exist (ReapDead). kResourceExhausted when every slot is held.
  StatusOr<int> Claim(pid_t pid);
  // Unmarks and frees slot `holder`.
  void Release(int holder);
  // Whether every change rings `holder`'s doorbell, or only changes on its CPUs (the default).
  void WatchAll(int holder, bool all);
  // Counts each of `cpus` busy once more for slot `holder`, which must have nothing marked
  // (FailedPrecondition otherwise); InvalidArgument for a CPU outside the node. Wakes every
  // waiter (WaitForChange).
  Status Mark(int holder, const std::vector<int>& cpus);
  // Takes back what Mark counted for `holder`; nothing if it marked nothing. Wakes every waiter.
  void Unmark(int holder);
  // Takes back the slots (and counts) of processes that no longer exist; returns how many.
  int ReapDead();

  // Busy emulated threads on `cpu` (0 outside the node).
  uint32_t busy(int cpu) const;
  // The most busy threads on any of `cpus`.
  uint32_t MaxBusy(const std::vector<int>& cpus) const;
  uint32_t busy_cpus() const { return header_->busy_cpus.load(std::memory_order_acquire); }
  uint32_t generation() const { return header_->generation.load(std::memory_order_acquire); }
  SteadyTime changed_at() const;
  // Blocks until generation() differs from `seen`, or for `timeout`; may return early
  // (spuriously): callers re-read the state.
  void WaitForChange(uint32_t seen, std::chrono::nanoseconds timeout) const;

  // `holder`'s doorbell (0 for a bad holder) and the time of the change that rang it last.
  uint32_t doorbell(int holder) const;
  SteadyTime rung_at(int holder) const;
  // Blocks until doorbell(holder) differs from `seen`, or for `timeout`; may return early.
  void WaitForDoorbell(int holder, uint32_t seen, std::chrono::nanoseconds timeout) const;

 private:
  VirtualCpus(std::string name, std::unique_ptr<boost::interprocess::mapped_region> region,
              bool owner);
  HolderSlot* slot(int holder) const;
  // Decrements the counts of slot `s`'s mask (never below zero) and clears `marked`.
  void Uncount(HolderSlot* s);
  // After a change of the counts of the CPUs in `changed` (by slot `by`): records its time,
  // bumps the generation and rings the doorbells of the holders it concerns.
  void Publish(const HolderSlot* by, const uint64_t* changed);

  std::string name_;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
  bool owner_;
  VirtualCpusHeader* header_;
  std::atomic<uint32_t>* busy_;  // num_cpus_ counts
  HolderSlot* holders_;
  int num_cpus_;
  int max_holders_;
};

}  // namespace packrat::shm
