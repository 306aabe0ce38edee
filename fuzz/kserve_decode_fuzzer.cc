// The KServe v2 request decoder (JSON tensors and the binary tensor extension) on arbitrary
// bytes, against a signature with every kind of input: fixed and variable dims, several
// datatypes. The first byte picks JSON or binary framing and where the JSON header ends.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/kserve/kserve_codec.h"

namespace {

const packrat::ModelSignature& Signature() {
  static const packrat::ModelSignature sig = [] {
    packrat::ModelSignature s;
    s.name = "m";
    s.max_batch = 64;
    s.inputs = {{"x", packrat::DataType::kFp32, {-1, 4}},
                {"ids", packrat::DataType::kInt64, {-1, -1}},
                {"mask", packrat::DataType::kBool, {-1, 2, 2}},
                {"h", packrat::DataType::kFp16, {-1}}};
    s.outputs = {{"y", packrat::DataType::kFp32, {-1, 3}}};
    return s;
  }();
  return sig;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  auto body =
      std::make_shared<const std::string>(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<size_t> header_length;
  if (mode & 1) header_length = (mode >> 1) * body->size() / 127;  // binary framing
  auto decoded = packrat::DecodeInferRequest(Signature(), body, header_length);
  if (decoded.ok()) {
    // Whatever was accepted must be consistent: every input has the batch's rows.
    for (const auto& in : decoded->inputs) {
      if (in.shape.empty() || in.shape[0] != decoded->rows) __builtin_trap();
    }
  }
  return 0;
}
