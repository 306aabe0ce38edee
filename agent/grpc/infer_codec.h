// ModelInfer messages <-> the agent's request and tensors: the gRPC counterpart of
// agent/kserve/kserve_codec.h, with the same checks against the model's signature
// (agent/kserve/request_validation.h), so a request REST accepts gRPC accepts, and the reverse.
//
// Inputs arrive as `raw_input_contents` (bytes, little-endian, row-major) or as typed
// `contents`; outputs always leave in `raw_output_contents`, one entry per output, never typed
// (tritonclient reads nothing else: README-proto.md §3).
//
// Thread-safety: pure functions.
#pragma once

#include <memory>
#include <vector>

#include "agent/grpc/grpc_service.pb.h"
#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/tensor.h"
#include "common/status.h"

namespace packrat {

// Validates `request` against `signature` and builds the request the batcher takes.
//  - Inputs with typed `contents` are converted (range-checked) into DecodedRequest::owned.
//    FP16 and BF16 have no typed member and must travel raw.
//  - The other inputs take the `raw_input_contents` entries in order (Triton's rule, which also
//    lets KServe's client mix both kinds in one request); each entry must hold exactly the bytes
//    its shape needs, and no entry may be left over. Views point into those entries, so
//    `keepalive` must own `request`; it is kept in DecodedRequest::keepalive.
//  - Request parameter `timeout` (int64 or uint64, µs, as Triton's) sets timeout_us; other
//    parameters, and input parameters such as KServe's `binary_data_size`, are ignored.
//  - Requested outputs must exist, once each; the `classification` output parameter is refused.
//  - Inputs and outputs with the parameters `shared_memory_region`, `shared_memory_byte_size`
//    and `shared_memory_offset` (int64 or uint64) resolve them in `regions` (null: the
//    extension is off), as REST does; such an input takes no raw_input_contents entry.
// Errors are kInvalidArgument naming the input, output or parameter.
StatusOr<DecodedRequest> DecodeModelInferRequest(const ModelSignature& signature,
                                                 const inference::ModelInferRequest& request,
                                                 std::shared_ptr<const void> keepalive,
                                                 const SharedMemoryRegistry* regions = nullptr);

// Fills `response` with the model's name and version, the request's id and `outputs` (every
// output of the model, as the batcher returned them): all of them in the order given, or the
// ones `request.outputs` asked for in the order asked, each as an `outputs` entry plus its bytes
// in `raw_output_contents`. An output with a shared-memory region is written there instead: its
// entry carries `shared_memory_region` and `shared_memory_byte_size` parameters and its raw entry
// is empty (kInvalidArgument if it needs more bytes than the reference gave). kInternal if an
// output is missing or its bytes do not match its shape.
Status EncodeModelInferResponse(const ModelSignature& signature, const DecodedRequest& request,
                                const std::vector<Tensor>& outputs,
                                inference::ModelInferResponse* response);

}  // namespace packrat
