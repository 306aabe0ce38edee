// Tensor element types as named by the KServe v2 / Open Inference Protocol.
//
// The numeric values are stored in shared memory (shm/layout.h), so they are part of the
// agent <-> runtime ABI: append only, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace packrat {

enum class DataType : uint8_t {
  kInvalid = 0,
  kBool = 1,
  kUint8 = 2,
  kInt8 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kFp16 = 7,
  kFp32 = 8,
  kFp64 = 9,
  kBf16 = 10,
};

// "FP32" -> kFp32; nullopt for names Packrat does not serve (e.g. BYTES).
std::optional<DataType> DataTypeFromName(std::string_view name);
// kFp32 -> "FP32".
std::string_view DataTypeName(DataType type);
// Size of one element in bytes; 0 for kInvalid.
size_t DataTypeSize(DataType type);

// IEEE-754 binary16 <-> binary32, round to nearest even. Used by the JSON codec for FP16.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);

}  // namespace packrat
