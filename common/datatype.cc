#include "common/datatype.h"

#include <array>
#include <bit>
#include <cstring>
#include <utility>

namespace packrat {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 10> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBf16, "BF16", 2},
}};

}  // namespace

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

std::string_view DataTypeName(DataType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "INVALID";
}

size_t DataTypeSize(DataType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 0;
}

uint16_t FloatToHalf(float value) {
  const uint32_t f = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflows to Inf
  if (abs < 0x38800000u) {                                               // subnormal half or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t f;
  if (exp == 0) {
    if (mant == 0) {
      f = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      f = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    f = sign | 0x7f800000u | (mant << 13);
  } else {
    f = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(f);
}

}  // namespace packrat
