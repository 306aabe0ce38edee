// The node agent: HTTP front ends, the served models and their runtime processes.
//
// Start() binds the listeners (so ports are known at once), writes the port file, starts
// serving health and metadata, and loads the models on a background thread; a model accepts
// inference once its instances are warm. Shutdown() stops accepting, drains in-flight requests,
// stops the runtimes and removes their shared memory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "agent/config/config.h"
#include "agent/http/config_watch.h"
#include "agent/http/http_server.h"
#include "agent/http/kserve_handler.h"
#include "agent/http/management_handler.h"
#include "agent/http/metrics_handler.h"
#include "agent/metrics/agent_metrics.h"
#include "agent/model/model_repository.h"
#include "agent/model/node_controller.h"
#include "agent/pool/cpuset_controller.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/resource_allocator.h"
#include "agent/pool/virtual_node.h"
#include "common/mutex.h"

namespace packrat {

class GrpcServer;  // agent/grpc/grpc_server.h

struct AgentOptions {
  Config config;
  std::string runtime_path;  // packrat-runtime executable
  std::string port_file;     // if set, {"http":P,"management":Q,"metrics":R[,"grpc":G]} is
                             // written here ("grpc" while the gRPC server listens)
  // Called once, on the loader thread, when start-up fails after the listeners started: with
  // strict readiness (server.strict_readiness), a model the config or the repository asks for
  // did not load. The caller stops the agent (Shutdown) and reads StartupFailure(). Must not
  // block; may be empty.
  std::function<void()> on_startup_failure;
};

class Agent {
 public:
  static StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options);
  ~Agent();  // Shutdown()s

  uint16_t http_port() const { return http_->port(); }
  uint16_t management_port() const { return management_->port(); }
  uint16_t metrics_port() const { return metrics_server_->port(); }
  // 0 when gRPC is off (`server.grpc: off`, or its default port was taken).
  uint16_t grpc_port() const;
  // Where runtimes' cgroups are made (or that only affinity is used).
  const CpusetController& cpusets() const { return *cpusets_; }
  // Blocks until every model has finished loading, ready or failed.
  void WaitForModels();
  // OK, or why start-up failed after the listeners started (the first model asked for at start
  // that did not load, strict readiness only): "model 'm': ...". Thread-safe.
  Status StartupFailure() const;
  // Graceful stop (see the class comment). Idempotent.
  void Shutdown();

 private:
  explicit Agent(AgentOptions options);
  void LoadModels();
  // A model of this node (not loaded yet): options from the server config, its metrics series
  // counted (AgentMetrics::AcquireModel) until the last holder lets it go. InvalidArgument
  // naming the model where its kernel settings cannot be resolved (ResolveKernelSettings).
  StatusOr<std::shared_ptr<ServedModel>> MakeModel(ModelConfig config);

  AgentOptions options_;
  ForkExecLauncher launcher_;
  std::unique_ptr<VirtualNode> virtual_node_;  // null: a real node without emulated models
  std::unique_ptr<ResourceAllocator> allocator_;
  std::unique_ptr<CpusetController> cpusets_;
  std::unique_ptr<metrics::AgentMetrics> metrics_;
  std::unique_ptr<AccessLog> access_log_;  // null: off; before the servers that write to it
  ConfigWatch config_watch_;               // before models_, whose changes it hears
  ModelRegistry models_;
  std::unique_ptr<NodeController> node_;  // null: server.node_partition off
  std::unique_ptr<ModelRepository> repository_;
  // Regions clients registered; before the front ends that resolve references into them.
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  KserveHandler handler_{&models_};
  ManagementHandler management_handler_{&models_, &handler_, &config_watch_};
  std::unique_ptr<MetricsHandler> metrics_handler_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpServer> management_;
  std::unique_ptr<HttpServer> metrics_server_;
  std::unique_ptr<GrpcServer> grpc_;  // null when off
  std::thread loader_;
  mutable Mutex startup_mu_;
  Status startup_failure_ GUARDED_BY(startup_mu_);
  bool serving_ = false;  // the listeners started: Shutdown() drains
  bool shut_down_ = false;
};

}  // namespace packrat
