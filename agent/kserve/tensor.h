// Plain tensor descriptions shared by the KServe codec, the batcher and the instance channels.
// No torch here: tensors are (datatype, shape, bytes) in row-major order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/datatype.h"

namespace packrat {

// A declared model input or output. shape[0] is the batch dimension and is -1 in configs;
// any other -1 is a variable dimension (allowed for inputs, which then must agree within a batch).
struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;

  // Bytes of one batch row (product of shape[1..] × element size); -1 if a non-batch dim is -1.
  int64_t RowBytes() const;
  bool operator==(const TensorSpec&) const = default;
};

// What clients see of a model: its tensors and how many rows one request may carry.
struct ModelSignature {
  std::string name;
  std::string version = "1";
  std::string platform = "pytorch_torchscript";
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t max_batch = 0;  // max rows in one request; 0 = unlimited
  bool operator==(const ModelSignature&) const = default;
};

// A read-only view of one tensor's bytes. The bytes are owned elsewhere (an HTTP body, a decode
// buffer, a shared-memory slab); whoever hands out a TensorView states how long it stays valid.
struct TensorView {
  std::string name;
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t byte_size = 0;
};

// A tensor that owns its bytes.
struct Tensor {
  std::string name;
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  TensorView View() const { return {name, datatype, shape, bytes.data(), bytes.size()}; }
};

// Number of elements of a shape; -1 if any dimension is negative, or on overflow.
int64_t ElementCount(const std::vector<int64_t>& shape);
// "[1,3,224,224]"
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace packrat
