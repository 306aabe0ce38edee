// A virtual node: the agent plans, places and reconfigures over N emulated CPUs, with emulated
// runtimes (emulator/) in place of real ones, so that its gains and failures at 16-128 cores
// can be studied on a two-core machine (server.virtual_cpus, `emulate:`).
//
//   * The topology is synthetic: CPUs 0..N-1, one core each (no SMT), sockets of
//     server.virtual_cpus_per_socket CPUs (one socket by default), memory node = socket. The
//     allocator places instances on it by its usual rules; the thread budget T is N.
//   * Nothing touches the machine's CPUs: no cgroups (the cpuset controller is affinity-only)
//     and no sched_setaffinity (the CPU ids are passed to the emulated runtimes, which never pin).
//   * The node's busy CPUs live in one shared-memory segment (shm/virtual_cpus.h), made here,
//     named on every emulated runtime's command line; two runtimes on one CPU slow each other.
//
// Emulated models on a real node (`emulate:` without server.virtual_cpus) use the same shared
// state over the real CPU ids, and are pinned as real runtimes are (harmless: they sleep).
//
// Thread-safety: immutable after Create; the shared state is process-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/pool/cpu_topology.h"
#include "common/status.h"
#include "shm/virtual_cpus.h"

namespace packrat {

class VirtualNode {
 public:
  // The node `config` asks for: virtual with server.virtual_cpus, else over `real_cpus` (the
  // agent's usable CPUs) when some configured model is emulated; nullptr when neither (no
  // shared state is made). Fails only if the shared memory cannot be made.
  static StatusOr<std::unique_ptr<VirtualNode>> Create(const Config& config,
                                                       const std::vector<int>& real_cpus);

  // CPUs 0..cpus-1, sockets of `per_socket` CPUs (<= 0: one socket), no SMT.
  static CpuTopology Topology(int cpus, int per_socket);

  bool is_virtual() const { return is_virtual_; }
  // The virtual topology (is_virtual() only).
  const CpuTopology& topology() const { return topology_; }
  // The shared state's name, for the emulated runtimes' --node.
  const std::string& state_name() const { return state_->name(); }
  std::string Describe() const;

 private:
  VirtualNode(bool is_virtual, CpuTopology topology, std::unique_ptr<shm::VirtualCpus> state)
      : is_virtual_(is_virtual), topology_(std::move(topology)), state_(std::move(state)) {}

  const bool is_virtual_;
  const CpuTopology topology_;
  const std::unique_ptr<shm::VirtualCpus> state_;
};

// Tells `model` about the node (`node` may be null: a real node with no shared state): where
// its emulated runtimes find the shared state, and whether its CPUs are virtual. The agent
// calls it for every model it makes (configured or from the repository).
void ResolveEmulation(const VirtualNode* node, ModelConfig* model);

// packrat-emulated-runtime, beside `runtime_path` (packrat-runtime).
std::string EmulatedRuntimePath(const std::string& runtime_path);

// The runtime executables `config`'s models need exist: packrat-runtime unless the node is
// virtual, packrat-emulated-runtime where a model is emulated or the node virtual. NotFound
// names the missing one.
Status CheckRuntimes(const Config& config, const std::string& runtime_path);

// FailedPrecondition for a model that is not emulated on a virtual node (real runtimes cannot
// run on virtual CPUs): a config error for configured models; for repository models the
// starts fail with this.
Status CheckEmulated(const ModelConfig& model);

}  // namespace packrat
