// GrpcServer: the agent's KServe v2 gRPC listener (`server.grpc`), serving InferenceService
// (inference_service.h) with gRPC's callback API on gRPC's own threads.
//
// Lifecycle, mirroring HttpServer's: Start() binds (port 0 picks a free port, known at once) and
// serves; SetShuttingDown() makes readiness false; StopAccepting() answers every new call but the
// health checks UNAVAILABLE at once, while calls in flight go on; Stop() closes the listener,
// waits for those (gRPC cancels what is left at the deadline) and joins every thread. Call Stop()
// only after the models have answered every request they accepted (ServedModel::Stop): a
// ModelInfer finishes when its model answers it, and gRPC's shutdown waits for that.
//
// Thread-safety: every method may be called from any thread; Stop() from one thread at a time
// (the agent's shutdown).
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "agent/config/config.h"
#include "agent/grpc/inference_service.h"
#include "agent/http/access_log.h"
#include "agent/http/unix_socket_file.h"
#include "agent/model/model_registry.h"
#include "agent/model/repository_control.h"
#include "common/status.h"

namespace packrat {

struct GrpcServerOptions {
  Endpoint endpoint{"127.0.0.1", 8001};
  // Largest request message gRPC accepts (larger: RESOURCE_EXHAUSTED from gRPC); at most
  // INT32_MAX. Responses are not limited.
  uint64_t max_message_bytes = 64ull << 20;
  int max_concurrent_streams = 1024;  // per connection (HTTP/2 SETTINGS); more wait in the client
  ControlGate control_gate;           // what the repository RPCs must pass (the agent's one gate)
  // server.grpc_unix_socket: the same service on this Unix socket too (a sidecar's upstream
  // on a shared hostPath); "" for none. A stale socket file is replaced (UnixSocketFile).
  std::string unix_socket;
  // The system shared-memory regions (not owned; must outlive the server); null: the
  // extension's RPCs answer UNAVAILABLE and requests may not reference regions.
  SharedMemoryRegistry* shared_memory = nullptr;
  // server.access_log: one line per call (grpc_access_log.h); not owned, must outlive the
  // server; null: none.
  const AccessLog* access_log = nullptr;
};

class GrpcServer {
 public:
  // `models` and `repository` (may be null: no repository RPCs) are not owned and must outlive
  // the server. Unavailable if the endpoint cannot be bound (also when another process listens
  // there: gRPC's SO_REUSEPORT is turned off).
  static StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                     const ModelRegistry* models,
                                                     RepositoryControl* repository);
  ~GrpcServer();  // Stop()s with no grace

  uint16_t port() const { return port_; }

  // Readiness (ServerReady, ModelReady) answers false from now on.
  void SetShuttingDown() { service_->SetShuttingDown(); }
  // New calls (but ServerLive and ServerReady) are answered UNAVAILABLE from now on; calls in
  // flight continue. Never blocks. Idempotent.
  void StopAccepting();
  // Stops accepting, closes the listener and blocks until every call has finished (calls still
  // open at `deadline` are cancelled) and the repository calls in progress have returned.
  // Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);

 private:
  GrpcServer() = default;

  std::unique_ptr<InferenceService> service_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
  UnixSocketFile unix_socket_file_;  // removed when the server stops
  bool stopped_ = false;
};

}  // namespace packrat
