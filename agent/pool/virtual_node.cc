#include "agent/pool/virtual_node.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "shm/segment.h"

namespace packrat {

StatusOr<std::unique_ptr<VirtualNode>> VirtualNode::Create(const Config& config,
                                                           const std::vector<int>& real_cpus) {
  const int virtual_cpus = config.server.virtual_cpus;
  const bool emulated = std::any_of(config.models.begin(), config.models.end(),
                                    [](const ModelConfig& m) { return m.emulate.enabled; });
  if (virtual_cpus <= 0 && !emulated) return std::unique_ptr<VirtualNode>();
  const int cpus =
      virtual_cpus > 0
          ? virtual_cpus
          : std::max(
                1, (real_cpus.empty() ? 0 : *std::max_element(real_cpus.begin(), real_cpus.end())) +
                       1);
  // Named like the runtimes' segments, so a later agent removes it if this one dies.
  ASSIGN_OR_RETURN(std::unique_ptr<shm::VirtualCpus> state,
                   shm::VirtualCpus::Create(shm::Segment::MakeName(getpid(), "virtual-node"),
                                            std::min(cpus, shm::kMaxVirtualCpus)));
  CpuTopology topology;
  if (virtual_cpus > 0) topology = Topology(virtual_cpus, config.server.virtual_cpus_per_socket);
  return std::unique_ptr<VirtualNode>(
      new VirtualNode(virtual_cpus > 0, std::move(topology), std::move(state)));
}

CpuTopology VirtualNode::Topology(int cpus, int per_socket) {
  if (per_socket <= 0) per_socket = cpus;
  std::vector<CpuInfo> infos;
  for (int c = 0; c < cpus; ++c) {
    CpuInfo info;
    info.cpu = c;
    info.socket = c / per_socket;
    info.core = c % per_socket;
    info.node = info.socket;
    infos.push_back(info);
  }
  return CpuTopology(std::move(infos));
}

std::string VirtualNode::Describe() const {
  return (is_virtual_ ? "virtual node of " + topology_.Describe()
                      : std::string("emulated runtimes on the real CPUs")) +
         ", shared state " + state_->name();
}

void ResolveEmulation(const VirtualNode* node, ModelConfig* model) {
  model->emulate.virtual_node = node != nullptr && node->is_virtual();
  model->emulate.node_state = node != nullptr ? node->state_name() : std::string();
}

std::string EmulatedRuntimePath(const std::string& runtime_path) {
  return (std::filesystem::path(runtime_path).parent_path() / "packrat-emulated-runtime").string();
}

Status CheckRuntimes(const Config& config, const std::string& runtime_path) {
  const bool is_virtual = config.server.virtual_cpus > 0;
  const bool emulated =
      is_virtual || std::any_of(config.models.begin(), config.models.end(),
                                [](const ModelConfig& m) { return m.emulate.enabled; });
  if (!is_virtual && access(runtime_path.c_str(), X_OK) != 0) {
    return NotFound("runtime executable '" + runtime_path + "' not found");
  }
  const std::string emulator = EmulatedRuntimePath(runtime_path);
  if (emulated && access(emulator.c_str(), X_OK) != 0) {
    return NotFound("emulated runtime executable '" + emulator +
                    "' not found (it is built "
                    "beside packrat-runtime: the target packrat-emulated-runtime)");
  }
  return Status::Ok();
}

Status CheckEmulated(const ModelConfig& model) {
  if (!model.emulate.virtual_node || model.emulate.enabled) return Status::Ok();
  return FailedPrecondition("model '" + model.name +
                            "' is not emulated, and this node is virtual (server.virtual_cpus): "
                            "real runtimes cannot run on its CPUs; add `emulate: {profile: "
                            "FILE.csv}`");
}

}  // namespace packrat
