#include "agent/grpc/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "agent/grpc/grpc_access_log.h"
#include "common/logging.h"

namespace packrat {
namespace {

// "host:port", with an IPv6 host in brackets.
std::string Address(const Endpoint& endpoint) {
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

std::chrono::system_clock::time_point ToSystem(std::chrono::steady_clock::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             t - std::chrono::steady_clock::now());
}

// gRPC's own log lines (a bind that failed, a transport error) go through the agent's log, in
// its format (text or json) and at its level, instead of gRPC's stderr lines of another shape.
void ForwardGrpcLog(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  if (!LogEnabled(level)) return;
  LogMessage(level, args->file, args->line).stream() << "gRPC: " << args->message;
}

}  // namespace

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                        const ModelRegistry* models,
                                                        RepositoryControl* repository) {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex (gRPC's locks) tracks lock
  // order for deadlock detection: a graph update per Lock(), a few per cent of the agent's CPU
  // per gRPC call in a profile. Process-wide; only gRPC uses absl::Mutex here.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  static std::once_flag log_once;
  std::call_once(log_once, [] { gpr_set_log_function(ForwardGrpcLog); });
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->service_ = std::make_unique<InferenceService>(models, repository, options.control_gate,
                                                        options.shared_memory);
  const std::string address = Address(options.endpoint);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  if (!options.unix_socket.empty()) {
    RETURN_IF_ERROR(UnixSocketFile::Prepare(options.unix_socket, "gRPC"));
    builder.AddListeningPort("unix:" + options.unix_socket, grpc::InsecureServerCredentials());
  }
  builder.RegisterService(server->service_.get());
  if (options.access_log != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(AccessLogInterceptors(options.access_log));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<uint64_t>(options.max_message_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(-1);
  // gRPC sets SO_REUSEPORT by default, so a second agent would share the port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  try {
    server->server_ = builder.BuildAndStart();
  } catch (const std::exception& e) {
    return Unavailable("gRPC server on " + address + ": " + e.what());
  }
  if (server->server_ == nullptr || port <= 0) {
    if (server->server_ != nullptr) server->server_->Shutdown();
    server->server_.reset();  // nothing left for the destructor to stop
    return Unavailable("cannot listen on " + address + " for gRPC (in use, or not an address " +
                       "of this host)");
  }
  server->port_ = static_cast<uint16_t>(port);
  if (!options.unix_socket.empty()) {
    RETURN_IF_ERROR(server->unix_socket_file_.Claim(options.unix_socket));
  }
  return server;
}

GrpcServer::~GrpcServer() { Stop(std::chrono::steady_clock::now()); }

void GrpcServer::StopAccepting() {
  if (server_ != nullptr) service_->StopAccepting();
}

void GrpcServer::Stop(std::chrono::steady_clock::time_point deadline) {
  if (stopped_ || server_ == nullptr) return;
  stopped_ = true;
  service_->StopAccepting();
  // Closes the listener, waits for the calls in flight (cancelled at the deadline), then for
  // every callback to have returned.
  server_->Shutdown(ToSystem(deadline));
  server_->Wait();
  service_->StopRepositoryCalls();
  unix_socket_file_.Remove();
  PACKRAT_LOG(INFO) << "gRPC server stopped";
}

}  // namespace packrat
