#include "agent/grpc/grpc_access_log.h"

#include <chrono>
#include <string>

#include "agent/grpc/grpc_service.pb.h"
#include "agent/grpc/grpc_status.h"

namespace packrat {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

constexpr std::string_view kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

// One call's line, filled in as its hooks pass.
class AccessLogInterceptor : public grpc::experimental::Interceptor {
 public:
  AccessLogInterceptor(const AccessLog* log, const char* method)
      : log_(log), started_(std::chrono::steady_clock::now()) {
    entry_.listener = "grpc";
    entry_.method = "POST";
    entry_.path = method != nullptr ? method : "";
  }

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      for (const auto& [key, value] : *methods->GetRecvInitialMetadata()) {
        const std::string_view k(key.data(), key.size());
        const std::string_view v(value.data(), value.size());
        if (k == "x-request-id" && UsableRequestId(v)) entry_.request_id = std::string(v);
        if (k == "traceparent") entry_.trace_id = TraceIdOf(v);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        entry_.path == kModelInfer && methods->GetRecvMessage() != nullptr) {
      const auto* request =
          static_cast<const inference::ModelInferRequest*>(methods->GetRecvMessage());
      entry_.model = request->model_name();
      if (request->inputs_size() > 0 && request->inputs(0).shape_size() > 0) {
        entry_.rows = request->inputs(0).shape(0);
      }
      entry_.bytes_in = request->ByteSizeLong();
      if (entry_.request_id.empty() && UsableRequestId(request->id())) {
        entry_.request_id = request->id();
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("x-request-id", RequestId());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::StatusCode code = methods->GetSendStatus().error_code();
      entry_.request_id = RequestId();
      entry_.status = HttpStatusForGrpc(code);
      entry_.grpc_status = GrpcCodeName(code);
      entry_.time = std::chrono::system_clock::now();
      entry_.duration_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
              .count();
      log_->Write(entry_);
    }
    methods->Proceed();
  }

 private:
  const std::string& RequestId() {
    if (entry_.request_id.empty()) entry_.request_id = NewRequestId();
    return entry_.request_id;
  }

  const AccessLog* const log_;
  const std::chrono::steady_clock::time_point started_;
  AccessLogEntry entry_;
};

class AccessLogFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AccessLogFactory(const AccessLog* log) : log_(log) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new AccessLogInterceptor(log_, info->method());
  }

 private:
  const AccessLog* const log_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> AccessLogInterceptors(
    const AccessLog* log) {
  return std::make_unique<AccessLogFactory>(log);
}

}  // namespace packrat
