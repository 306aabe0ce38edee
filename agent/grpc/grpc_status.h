// Packrat's Status codes as gRPC status codes, the way Triton and KServe's servers map their
// errors (agent/grpc/README-proto.md §1):
//
//   kInvalidArgument    -> INVALID_ARGUMENT     kNotFound           -> NOT_FOUND
//   kAlreadyExists      -> ALREADY_EXISTS       kResourceExhausted  -> RESOURCE_EXHAUSTED
//   kOutOfRange         -> OUT_OF_RANGE         kFailedPrecondition -> UNAVAILABLE
//   kUnavailable        -> UNAVAILABLE          kDeadlineExceeded   -> DEADLINE_EXCEEDED
//   kCancelled          -> CANCELLED            kInternal           -> INTERNAL
//
// kFailedPrecondition is "model not ready", which Triton and KServe answer UNAVAILABLE (and
// KServe's client retries). A full queue is RESOURCE_EXHAUSTED (REST's 429), not Triton's
// UNAVAILABLE: retrying at once does not help, and KServe's client retries only UNAVAILABLE.
// kOutOfRange (a row larger than the runtimes can ever take, REST's 413) keeps its own code.
//
// Thread-safety: pure functions.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace packrat {

grpc::StatusCode GrpcCodeFor(StatusCode code);
// The HTTP status REST answers for the outcome a gRPC code stands for (HttpStatusFor of the
// Status code GrpcCodeFor maps to it); also 401/403 for UNAUTHENTICATED/PERMISSION_DENIED and
// 501 for UNIMPLEMENTED, which gRPC itself answers. For metrics and access logs.
int HttpStatusForGrpc(grpc::StatusCode code);
// The code's name as gRPC's documents spell it: "OK", "NOT_FOUND", ...
const char* GrpcCodeName(grpc::StatusCode code);
// The gRPC status with the mapped code and the message as it is.
grpc::Status ToGrpcStatus(const Status& status);

}  // namespace packrat
