// InferenceService: the RPCs of inference.GRPCInferenceService (grpc_service.proto) on the
// agent's models — the gRPC twin of KserveHandler (agent/http/kserve_handler.h). It reaches
// the same ServedModels through the same ModelRegistry, so a gRPC request joins the batches of
// REST ones, is validated alike (infer_codec.h) and counted in the same metric series.
//
// Callback API: every handler returns at once and never blocks a gRPC thread.
//  - ModelInfer submits to the model's batcher and finishes from the batcher's completion
//    callback. Its deadline is the earliest of the request's `timeout` parameter (µs), the
//    model's batching.timeout_ms and the client's gRPC deadline: a request whose client gave up
//    is not run.
//  - RepositoryIndex/ModelLoad/ModelUnload pass the agent's ControlGate (control_gate.h) first,
//    as the REST management API does, and run on a BlockingRunner of their own (they block
//    for seconds) and finish from there.
//  - SystemSharedMemoryStatus/Register/Unregister answer at once (a register maps the region on
//    the calling gRPC thread: a system call or three).
//  - ModelStatistics answers at once from the models' statistics (inference_statistics.h),
//    ModelConfig from the model's config and serving plan (triton_model_config.h).
//  - LogSettings reads the log settings, or (settings given) changes them through the gate
//    first (agent/kserve/log_settings.h), at once.
//  - ModelStreamInfer is not implemented (UNIMPLEMENTED); generative models answer ModelInfer
//    INVALID_ARGUMENT, pointing to REST's /generate.
// Status codes: grpc_status.h. Requests are counted in packrat_requests_total under the HTTP
// status REST answers for the same outcome (HttpStatusFor), so one series counts both.
//
// Lifetime: `models` and `repository` are not owned and must outlive the service; every call
// must be finished before it is destroyed (GrpcServer's Stop() sees to it, after the models have
// answered every request they accepted).
// Thread-safety: handlers run on gRPC's threads, several at once; SetShuttingDown() from any.
#pragma once

#include <atomic>
#include <memory>

#include "agent/grpc/blocking_runner.h"
#include "agent/grpc/grpc_service.grpc.pb.h"
#include "agent/http/control_gate.h"
#include "agent/kserve/shared_memory_registry.h"
#include "agent/model/model_registry.h"
#include "agent/model/repository_control.h"

namespace packrat {

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `repository` may be null: the repository RPCs then answer UNIMPLEMENTED. Each repository
  // RPC passes `gate` first (metadata "authorization"), or is answered UNAUTHENTICATED.
  // `regions` (not owned; may be null: the extension is off) serves the SystemSharedMemory RPCs
  // and the shared-memory references of ModelInfer.
  InferenceService(const ModelRegistry* models, RepositoryControl* repository,
                   ControlGate gate = ControlGate(), SharedMemoryRegistry* regions = nullptr);
  ~InferenceService() override;

  // From now on ServerReady and ModelReady answer false (graceful shutdown); calls in flight and
  // new inference still complete until the server stops.
  void SetShuttingDown() { shutting_down_.store(true, std::memory_order_release); }
  // From now on every call but ServerLive and ServerReady is answered UNAVAILABLE at once; calls
  // already accepted go on.
  void StopAccepting() { accepting_.store(false, std::memory_order_release); }
  // Lets repository calls in progress finish and refuses new ones (UNAVAILABLE). Blocks as long
  // as the slowest one. Idempotent.
  void StopRepositoryCalls() { repository_runner_.Stop(); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* context,
      const inference::SystemSharedMemoryStatusRequest* request,
      inference::SystemSharedMemoryStatusResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* context,
      const inference::SystemSharedMemoryRegisterRequest* request,
      inference::SystemSharedMemoryRegisterResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* context,
      const inference::SystemSharedMemoryUnregisterRequest* request,
      inference::SystemSharedMemoryUnregisterResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* context,
                                        const inference::LogSettingsRequest* request,
                                        inference::LogSettingsResponse* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;

 private:
  class InferAllocator;

  bool AllReady() const;
  bool accepting() const { return accepting_.load(std::memory_order_acquire); }
  // Runs `call` on the repository runner and finishes `reactor` with its status; answers at
  // once without a repository, or when the runner refuses.
  grpc::ServerUnaryReactor* RunRepositoryCall(grpc::CallbackServerContext* context,
                                              std::function<Status()> call);

  const ModelRegistry* const models_;
  RepositoryControl* const repository_;
  const ControlGate gate_;
  SharedMemoryRegistry* const regions_;
  std::unique_ptr<InferAllocator> infer_allocator_;  // ModelInfer's messages (zero-copy inputs)
  BlockingRunner repository_runner_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> accepting_{true};
};

}  // namespace packrat
