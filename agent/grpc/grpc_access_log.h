// Access-log lines for the gRPC listener (`server.access_log`, agent/http/access_log.h): one
// line per call, with listener "grpc", written just before the call's status is sent, so that
// a client holding its answer finds its line. Fields as for REST, where:
//   request_id   the call's x-request-id metadata (if usable), else a ModelInfer request's id,
//                else a generated one; sent back as x-request-id initial metadata
//   trace_id     from a W3C traceparent metadata entry
//   method, path "POST" and the RPC's path (/inference.GRPCInferenceService/ModelInfer)
//   status       the HTTP status REST answers for the same outcome (HttpStatusForGrpc), and
//   grpc_status  the gRPC code's name (OK, NOT_FOUND, ...)
//   model, rows  ModelInfer's model and its first input's batch dim
//   bytes_in     ModelInfer's request message size; others 0
// Each call's lines are written by an interceptor that gRPC makes per call
// (ServerInterceptorFactoryInterface), on gRPC's threads.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "agent/http/access_log.h"

namespace packrat {

// The interceptors of GrpcServerOptions::access_log; `log` is not owned and must outlive the
// server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> AccessLogInterceptors(
    const AccessLog* log);

}  // namespace packrat
