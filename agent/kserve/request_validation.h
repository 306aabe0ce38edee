// The checks of an inference request against a model's signature that every front end makes —
// REST (JSON tensors and the binary extension, kserve_codec.h) and gRPC (agent/grpc) — so that
// both accept and refuse the same requests, with the same messages. Each front end parses its
// own wire format and calls these at the same points: per input FindInput, CheckInputDatatype
// and CheckInputShape; then CheckAllInputsGiven and CheckInputRows; per requested output
// CheckRequestedOutput; for `parameters.timeout` CheckTimeoutUs; for shared-memory references
// ResolveInputRegion and ResolveOutputRegion, and CopyOutputToRegion when answering.
//
// Every error is kInvalidArgument (HTTP 400, gRPC INVALID_ARGUMENT) naming the input or output.
// Thread-safety: all functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/shared_memory_registry.h"
#include "agent/kserve/tensor.h"
#include "common/status.h"

namespace packrat {

// "'name'", and "input 'name': ", for the messages of every front end.
std::string Quoted(std::string_view s);
std::string InputContext(std::string_view name);

// The index in signature.inputs of the input called `name`.
StatusOr<size_t> FindInput(const ModelSignature& signature, std::string_view name);

// The request's datatype name for `spec`: a name Packrat serves, and the declared one.
Status CheckInputDatatype(const TensorSpec& spec, std::string_view type_name);

// The request's `shape` for `spec`: no negative dimension, the declared rank, fixed dimensions
// equal, at least one row, no overflow. Returns the bytes the input's data must have.
StatusOr<size_t> CheckInputShape(const TensorSpec& spec, const std::vector<int64_t>& shape);

// `given[i]`: whether signature.inputs[i] was in the request; each must be.
Status CheckAllInputsGiven(const ModelSignature& signature, const std::vector<bool>& given);

// `shapes[i]`: the checked shape of signature.inputs[i]. Every input has the same rows
// (shape[0]), at most the signature's max_batch. Returns the rows (0 for a model without inputs).
StatusOr<int64_t> CheckInputRows(const ModelSignature& signature,
                                 const std::vector<std::vector<int64_t>>& shapes);

// One requested output: a name the model has, not in `already` requested.
Status CheckRequestedOutput(const ModelSignature& signature, std::string_view name,
                            const std::vector<RequestedOutput>& already);

// An input's data in shared memory: `ref` resolved in `regions` (null: the extension is off),
// and exactly the `byte_size` bytes its shape needs.
StatusOr<SharedMemorySpan> ResolveInputRegion(const SharedMemoryRegistry* regions,
                                              const SharedMemoryRef& ref, std::string_view input,
                                              size_t byte_size);
// A requested output's target in shared memory: `ref` resolved in `regions` (null: off).
StatusOr<SharedMemorySpan> ResolveOutputRegion(const SharedMemoryRegistry* regions,
                                               const SharedMemoryRef& ref, std::string_view output);
// Copies output `view` into `span`; kInvalidArgument where it needs more bytes than the span.
Status CopyOutputToRegion(const TensorView& view, const SharedMemorySpan& span);

// `parameters.timeout` in microseconds, as Triton's: at most a day (beyond it a deadline of
// received + timeout overflows the clock); 0 sets none (nullopt: the model's timeout_ms applies).
StatusOr<std::optional<uint64_t>> CheckTimeoutUs(uint64_t timeout_us);

}  // namespace packrat
