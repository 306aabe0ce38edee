#include "agent/kserve/json_tensor.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "agent/kserve/request_validation.h"

namespace packrat::kserve_internal {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "JSON float conversion assumes IEEE-754");

std::string_view JsonTypeName(element_type type) {
  switch (type) {
    case element_type::ARRAY:
      return "array";
    case element_type::OBJECT:
      return "object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "number";
    case element_type::STRING:
      return "string";
    case element_type::BOOL:
      return "boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// JSON `data` -> tensor bytes.

// State of one flattening pass over an input's `data`.
struct FlattenState {
  std::string_view input;  // for error messages
  DataType type;
  uint8_t* out;  // room for `capacity` elements
  size_t capacity;
  size_t count = 0;   // leaves seen so far; leaves past `capacity` are counted, not stored
  std::string error;  // set by the first bad leaf
};

std::string LeafError(const FlattenState& st, std::string_view what) {
  std::string m = InputContext(st.input);
  m += "data element ";
  m += std::to_string(st.count);
  m += ' ';
  m += what;
  return m;
}

// "(N) is out of range for TYPE". (Built by appends: GCC 12 reports a false -Wrestrict on
// `"(" + std::to_string(n) + ...` once it is inlined into the converters.)
std::string OutOfRangeFor(const std::string& number, DataType type) {
  std::string m = "(";
  m += number;
  m += ") is out of range for ";
  m += DataTypeName(type);
  return m;
}

// Converters turn one JSON leaf into a T, or set st.error and return false.

template <typename T>
bool ConvertInteger(const element& value, FlattenState& st, T* result) {
  constexpr int64_t kMin = std::numeric_limits<T>::min();
  constexpr int64_t kMax = std::numeric_limits<T>::max();
  int64_t v = 0;
  switch (value.type()) {
    case element_type::INT64:
      if (value.get_int64().get(v) != simdjson::SUCCESS) break;
      if (v < kMin || v > kMax) {
        st.error = LeafError(st, OutOfRangeFor(std::to_string(v), st.type));
        return false;
      }
      *result = static_cast<T>(v);
      return true;
    case element_type::UINT64: {  // > INT64_MAX: too large for every integer type we serve
      uint64_t u = 0;
      if (value.get_uint64().get(u) != simdjson::SUCCESS) break;
      st.error = LeafError(st, OutOfRangeFor(std::to_string(u), st.type));
      return false;
    }
    case element_type::DOUBLE:
      st.error = LeafError(st, "must be an integer for " + std::string(DataTypeName(st.type)) +
                                   ", got a non-integral number");
      return false;
    default:
      break;
  }
  st.error = LeafError(st, "must be an integer for " + std::string(DataTypeName(st.type)) +
                               ", got " + std::string(JsonTypeName(value.type())));
  return false;
}

bool ConvertBool(const element& value, FlattenState& st, uint8_t* result) {
  bool b = false;
  if (value.get_bool().get(b) != simdjson::SUCCESS) {
    st.error = LeafError(
        st, "must be true or false for BOOL, got " + std::string(JsonTypeName(value.type())));
    return false;
  }
  *result = b ? 1 : 0;
  return true;
}

bool ToDouble(const element& value, FlattenState& st, double* result) {
  const element_type t = value.type();
  if ((t != element_type::DOUBLE && t != element_type::INT64 && t != element_type::UINT64) ||
      value.get_double().get(*result) != simdjson::SUCCESS) {
    st.error = LeafError(st, "must be a number for " + std::string(DataTypeName(st.type)) +
                                 ", got " + std::string(JsonTypeName(t)));
    return false;
  }
  return true;
}

// IEEE double -> float: rounds to nearest; magnitudes beyond FLT_MAX become ±Inf.
bool ConvertFp32(const element& value, FlattenState& st, float* result) {
  double d = 0;
  if (!ToDouble(value, st, &d)) return false;
  *result = static_cast<float>(d);
  return true;
}

bool ConvertFp64(const element& value, FlattenState& st, double* result) {
  return ToDouble(value, st, result);
}

// double -> float rounded to odd: truncated toward zero, with the last bit set if anything was
// cut off. A float so made, rounded again to nearest-even at 2 or more bits fewer (FP16's 11,
// BF16's 8 of float's 24), gives what one rounding of the double would: rounding the double to
// nearest float first could land on a tie the double was not, and break it the wrong way.
float ToFloatRoundedToOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::isinf(f)) return std::copysign(std::numeric_limits<float>::max(), f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

bool ConvertFp16(const element& value, FlattenState& st, uint16_t* result) {
  double d = 0;
  if (!ToDouble(value, st, &d)) return false;
  *result = FloatToHalf(ToFloatRoundedToOdd(d));
  return true;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

bool ConvertBf16(const element& value, FlattenState& st, uint16_t* result) {
  double d = 0;
  if (!ToDouble(value, st, &d)) return false;
  *result = FloatToBf16(ToFloatRoundedToOdd(d));
  return true;
}

// Walks `value` (a leaf, or arrays nested to any depth simdjson accepts) in row-major order.
template <typename T, bool (*Convert)(const element&, FlattenState&, T*)>
bool Flatten(const element& value, FlattenState& st) {
  if (value.type() == element_type::ARRAY) {
    array arr;
    if (value.get_array().get(arr) != simdjson::SUCCESS) return false;
    for (element child : arr) {
      if (!Flatten<T, Convert>(child, st)) return false;
    }
    return true;
  }
  T converted;
  if (!Convert(value, st, &converted)) return false;
  if (st.count < st.capacity) std::memcpy(st.out + st.count * sizeof(T), &converted, sizeof(T));
  ++st.count;
  return true;
}

// Number of leaves of `value`.
size_t CountLeaves(const element& value) {
  if (value.type() != element_type::ARRAY) return 1;
  array arr;
  if (value.get_array().get(arr) != simdjson::SUCCESS) return 0;
  size_t n = 0;
  for (element child : arr) n += CountLeaves(child);
  return n;
}

}  // namespace

// Converts `data` into exactly `count` elements of `type` in `out`.
Status DecodeJsonData(const element& data, std::string_view input, DataType type,
                      const std::vector<int64_t>& shape, size_t count, size_t json_size,
                      std::vector<uint8_t>* out) {
  auto count_mismatch = [&](size_t got) {
    return InvalidArgument(InputContext(input) + "'data' has " + std::to_string(got) +
                           " elements but shape " + ShapeToString(shape) + " needs " +
                           std::to_string(count));
  };
  // Every JSON leaf takes at least one byte, so a larger count cannot match. Counting the
  // leaves before allocating keeps a short 'data' with a large shape from costing up to eight
  // bytes per byte of the request (a walk of the parsed tape, far cheaper than the parse).
  if (count > json_size) return count_mismatch(CountLeaves(data));
  if (const size_t leaves = CountLeaves(data); leaves != count) return count_mismatch(leaves);

  out->resize(count * DataTypeSize(type));
  FlattenState st{input, type, out->data(), count, 0, {}};
  bool ok = false;
  switch (type) {
    case DataType::kBool:
      ok = Flatten<uint8_t, ConvertBool>(data, st);
      break;
    case DataType::kUint8:
      ok = Flatten<uint8_t, ConvertInteger<uint8_t>>(data, st);
      break;
    case DataType::kInt8:
      ok = Flatten<int8_t, ConvertInteger<int8_t>>(data, st);
      break;
    case DataType::kInt16:
      ok = Flatten<int16_t, ConvertInteger<int16_t>>(data, st);
      break;
    case DataType::kInt32:
      ok = Flatten<int32_t, ConvertInteger<int32_t>>(data, st);
      break;
    case DataType::kInt64:
      ok = Flatten<int64_t, ConvertInteger<int64_t>>(data, st);
      break;
    case DataType::kFp16:
      ok = Flatten<uint16_t, ConvertFp16>(data, st);
      break;
    case DataType::kFp32:
      ok = Flatten<float, ConvertFp32>(data, st);
      break;
    case DataType::kFp64:
      ok = Flatten<double, ConvertFp64>(data, st);
      break;
    case DataType::kBf16:
      ok = Flatten<uint16_t, ConvertBf16>(data, st);
      break;
    case DataType::kInvalid:
      break;
  }
  if (!ok) {
    if (st.error.empty()) st.error = InputContext(input) + "cannot decode 'data'";
    return InvalidArgument(std::move(st.error));
  }
  if (st.count != count) return count_mismatch(st.count);
  return Status::Ok();
}

namespace {

// ---------------------------------------------------------------------------------------------
// Response encoding.

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Writes `v` at `p` (room for at least 32 chars); returns the end.
template <typename T>
char* WriteNumber(char* p, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      std::memcpy(p, "null", 4);
      return p + 4;
    }
    if (v == 0 && std::signbit(v)) {  // "-0" would read back as the integer 0
      std::memcpy(p, "-0.0", 4);
      return p + 4;
    }
  }
  return std::to_chars(p, p + 32, v).ptr;
}

}  // namespace

// Upper bound on the characters of one JSON element of `type`, comma included.
size_t MaxElementChars(DataType type) {
  switch (type) {
    case DataType::kBool:
      return 6;  // false,
    case DataType::kUint8:
      return 4;  // 255,
    case DataType::kInt8:
      return 5;  // -128,
    case DataType::kInt16:
      return 7;  // -32768,
    case DataType::kInt32:
      return 12;  // -2147483648,
    case DataType::kInt64:
      return 21;  // -9223372036854775808,
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32:
      return 16;  // -1.17549435e-38,
    case DataType::kFp64:
      return 25;  // -2.2250738585072014e-308,
    case DataType::kInvalid:
      return 0;
  }
  return 0;
}

// Appends the `count` elements at `data` as a flat JSON array.
void AppendJsonData(std::string& out, DataType type, const uint8_t* data, size_t count) {
  const size_t start = out.size();
  // Slack so that WriteNumber may always assume 32 bytes of room.
  out.resize(start + 2 + count * MaxElementChars(type) + 32);
  char* p = out.data() + start;
  *p++ = '[';
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) *p++ = ',';
    switch (type) {
      case DataType::kBool:
        if (data[i] != 0) {
          std::memcpy(p, "true", 4);
          p += 4;
        } else {
          std::memcpy(p, "false", 5);
          p += 5;
        }
        break;
      case DataType::kUint8:
        p = WriteNumber(p, static_cast<unsigned>(data[i]));
        break;
      case DataType::kInt8:
        p = WriteNumber(p, static_cast<int>(static_cast<int8_t>(data[i])));
        break;
      case DataType::kInt16:
        p = WriteNumber(p, Load<int16_t>(data + 2 * i));
        break;
      case DataType::kInt32:
        p = WriteNumber(p, Load<int32_t>(data + 4 * i));
        break;
      case DataType::kInt64:
        p = WriteNumber(p, Load<int64_t>(data + 8 * i));
        break;
      case DataType::kFp16:
        p = WriteNumber(p, HalfToFloat(Load<uint16_t>(data + 2 * i)));
        break;
      case DataType::kBf16:
        p = WriteNumber(p, Bf16ToFloat(Load<uint16_t>(data + 2 * i)));
        break;
      case DataType::kFp32:
        p = WriteNumber(p, Load<float>(data + 4 * i));
        break;
      case DataType::kFp64:
        p = WriteNumber(p, Load<double>(data + 8 * i));
        break;
      case DataType::kInvalid:
        break;
    }
  }
  *p++ = ']';
  out.resize(static_cast<size_t>(p - out.data()));
}

}  // namespace packrat::kserve_internal
