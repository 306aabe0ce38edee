// Decides which CPUs and memory nodes each runtime gets (packrat-paper §3.4).
//
// Rules, in order:
//   1. no CPU is given to two instances of one placement (one instance set), nor to an instance
//      the caller keeps (`exclude`);
//   2. an instance stays on one socket when some socket has enough eligible CPUs, and its memory
//      nodes are that socket's; only an instance larger than any socket spans sockets;
//   3. instances are spread round-robin over the sockets, largest first;
//   4. among eligible CPUs, those held by fewer live instances come first (a shadow set takes
//      idle CPUs before the ones the draining set still runs on), then first SMT siblings
//      before second ones, then ascending CPU number.
// The thread budget T (cores, capped by the CPU quota) bounds plans; Place() itself only
// checks that every instance can get distinct CPUs.
//
// Node-wide view: a model may be given a *share*, the CPUs only it places on (the model
// repository gives each model it loads the CPUs no other model holds; the node partition moves
// shares between models). A model without a share places anywhere, as the main config's models
// always have. FreeCpus() is what no share contains and no live instance holds.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/pool/cpu_topology.h"
#include "common/status.h"
#include "common/mutex.h"

namespace packrat {

struct Placement {
  std::vector<int> cpus;  // ascending
  std::vector<int> mems;  // NUMA nodes of those CPUs, ascending
};

class ResourceAllocator;

// Counts `cpus` as held by one live instance until destroyed. Movable.
class CpuLease {
 public:
  CpuLease() = default;
  CpuLease(CpuLease&& other) noexcept { *this = std::move(other); }
  CpuLease& operator=(CpuLease&& other) noexcept;
  ~CpuLease();

 private:
  friend class ResourceAllocator;
  CpuLease(ResourceAllocator* owner, std::vector<int> cpus)
      : owner_(owner), cpus_(std::move(cpus)) {}
  ResourceAllocator* owner_ = nullptr;
  std::vector<int> cpus_;
};

class ResourceAllocator {
 public:
  // `topology` holds the usable CPUs only; `thread_budget` is T (≤ its size).
  ResourceAllocator(CpuTopology topology, int thread_budget);

  const CpuTopology& topology() const { return topology_; }
  int thread_budget() const { return thread_budget_; }

  // One placement per entry of `threads`, in the same order. ResourceExhausted when the
  // instances cannot all get distinct CPUs outside `exclude`.
  StatusOr<std::vector<Placement>> Place(const std::vector<int>& threads,
                                         const std::vector<int>& exclude) const;

  // Marks `cpus` held by a live instance for as long as the lease lives (rule 4).
  CpuLease Hold(const std::vector<int>& cpus);
  // How many live instances hold `cpu` (a shadow set placed on held CPUs starts cold).
  int holders(int cpu) const;

  // Gives `model` exactly `cpus` (replacing its share). InvalidArgument for a CPU outside the
  // topology or in another model's share.
  Status SetShare(const std::string& model, std::vector<int> cpus);
  // `model` places anywhere again; its CPUs return to the free pool.
  void ReleaseShare(const std::string& model);
  // The model's share, ascending; nullopt if it has none (it may place anywhere).
  std::optional<std::vector<int>> Share(const std::string& model) const;
  // Every share, by model.
  std::map<std::string, std::vector<int>> Shares() const;
  // CPUs in no share and held by no live instance, ascending.
  std::vector<int> FreeCpus() const;
  // The CPUs a model must not place on: every topology CPU outside its share (none without one).
  std::vector<int> OutsideShare(const std::string& model) const;

 private:
  friend class CpuLease;
  void Release(const std::vector<int>& cpus);

  const CpuTopology topology_;
  const int thread_budget_;
  std::vector<int> sibling_rank_;  // by topology index: 0 for a core's first CPU, 1, ...
  mutable Mutex mu_;
  std::vector<int> holders_ GUARDED_BY(mu_);  // by topology index
  std::map<std::string, std::vector<int>> shares_ GUARDED_BY(mu_);
};

}  // namespace packrat
