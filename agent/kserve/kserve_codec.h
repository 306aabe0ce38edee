// Decoding and encoding of KServe v2 / Open Inference Protocol REST inference messages:
// JSON tensors and the binary tensor data extension.
//
// Spec: https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/ and the
// Triton binary data extension (`Inference-Header-Content-Length`, `binary_data_size`,
// `binary_data`, `binary_data_output`).
//
// Thread-safety: all functions are pure; call them from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kserve/shared_memory_registry.h"
#include "agent/kserve/tensor.h"
#include "common/json_string.h"
#include "common/status.h"

namespace packrat {

struct RequestedOutput {
  std::string name;
  // The `binary_data` parameter of this output; DecodeInferRequest defaults it to the request's
  // `binary_data_output` when the output does not give it.
  bool binary = false;
  // Its `shared_memory_region` parameters, resolved: the output is written there, and the
  // response carries only its name, datatype and shape.
  std::optional<SharedMemorySpan> region = std::nullopt;
};

// A fully validated inference request. Every input of the signature is present exactly once,
// in signature order, with the declared datatype, a shape that matches the declared one (same
// rank; fixed dims equal) and exactly ElementCount(shape) × element-size bytes.
struct DecodedRequest {
  std::string id;                  // echoed in the response; may be empty
  std::vector<TensorView> inputs;  // views into `body` or `owned`, valid while this object lives
  int64_t rows = 0;                // shape[0] of the inputs (all inputs agree)
  // Outputs the client asked for, in the order asked. Empty = all outputs, in JSON unless
  // `binary_data_output` was set in the request parameters.
  std::vector<RequestedOutput> outputs;
  bool binary_data_output = false;     // request-level `parameters.binary_data_output`
  std::optional<uint64_t> timeout_us;  // request-level `parameters.timeout` (µs), if given

  // Storage behind the views. `body` is the HTTP body (binary tensors point into it);
  // `owned` holds tensors converted from JSON (or from gRPC typed contents); `keepalive` owns
  // any other message the views point into (a gRPC request's raw_input_contents).
  std::shared_ptr<const std::string> body;
  std::vector<std::vector<uint8_t>> owned;
  std::shared_ptr<const void> keepalive;
  // Leases on the shared-memory regions inputs point into (system shared-memory extension).
  std::vector<SharedMemorySpan> input_regions;
};

// Decodes an infer request body for `signature`.
//  - `header_length`: value of `Inference-Header-Content-Length`, if the header was present;
//    the first header_length bytes are JSON and the rest is binary tensor data, consumed in
//    input order by inputs that carry `parameters.binary_data_size`.
//  - Errors are kInvalidArgument with a message naming the offending input/field (HTTP 400).
//  - Accepts `data` flat or nested (row-major), numbers for numeric types (integers must be
//    integral and in range), true/false for BOOL. FP16 is converted from JSON numbers.
//  - `regions` (null: the extension is off) resolves the parameters `shared_memory_region`,
//    `shared_memory_byte_size` and `shared_memory_offset` of inputs (whose views then point
//    into the region) and of requested outputs (request_validation.h).
StatusOr<DecodedRequest> DecodeInferRequest(const ModelSignature& signature,
                                            std::shared_ptr<const std::string> body,
                                            std::optional<size_t> header_length,
                                            const SharedMemoryRegistry* regions = nullptr);

struct EncodedResponse {
  std::string body;
  std::string content_type;             // "application/json" or "application/octet-stream"
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON header
};

// Encodes an infer response with `outputs` (all of the model's outputs, in signature order),
// honouring `request.outputs` / `request.binary_data_output`: JSON `data` arrays (flat, row-major)
// or binary appended after the JSON header with `parameters.binary_data_size`.
// An output with a shared-memory region is copied there and answered with
// `parameters.shared_memory_region` and `shared_memory_byte_size` (its bytes), no data;
// kInvalidArgument where it needs more bytes than the reference gave.
// Floats are printed shortest-round-trip (std::to_chars); NaN and ±Inf, which JSON cannot
// represent, are written as null. Unknown requested output names are kInvalidArgument.
StatusOr<EncodedResponse> EncodeInferResponse(const ModelSignature& signature,
                                              const DecodedRequest& request,
                                              const std::vector<TensorView>& outputs);

// `{"error":"<escaped message>"}`
std::string ErrorJson(std::string_view message);

}  // namespace packrat
