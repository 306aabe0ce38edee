#include "agent/kserve/kserve_codec.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace packrat {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "JSON float conversion assumes IEEE-754");

// A parser grows to the largest document it has seen; a thread keeps one no bigger than this.
constexpr size_t kMaxRetainedParserCapacity = 16u << 20;

// Lends the calling thread's DOM parser for one decode. Reusing it saves the allocation of
// its buffers on every request; a parser that grew past kMaxRetainedParserCapacity is dropped
// when the lease ends so that one huge request does not pin memory for the thread's lifetime.
class ParserLease {
 public:
  ParserLease() {
    if (!parser_) parser_ = std::make_unique<simdjson::dom::parser>();
  }
  ~ParserLease() {
    if (parser_->capacity() > kMaxRetainedParserCapacity) parser_.reset();
  }
  ParserLease(const ParserLease&) = delete;
  ParserLease& operator=(const ParserLease&) = delete;

  simdjson::dom::parser& get() { return *parser_; }

 private:
  static thread_local std::unique_ptr<simdjson::dom::parser> parser_;
};

thread_local std::unique_ptr<simdjson::dom::parser> ParserLease::parser_;

std::string Quoted(std::string_view s) {
  std::string out = "'";
  out.append(s);
  out += '\'';
  return out;
}

std::string InputContext(std::string_view name) { return "input " + Quoted(name) + ": "; }

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

// Looks up `key` in `obj`; false if absent.
bool Find(const object& obj, std::string_view key, element* value) {
  return obj.at_key(key).get(*value) == simdjson::SUCCESS;
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
        st.error = LeafError(st, "(" + std::to_string(v) + ") is out of range for " +
                                     std::string(DataTypeName(st.type)));
        return false;
      }
      *result = static_cast<T>(v);
      return true;
    case element_type::UINT64: {  // > INT64_MAX: too large for every integer type we serve
      uint64_t u = 0;
      if (value.get_uint64().get(u) != simdjson::SUCCESS) break;
      st.error = LeafError(st, "(" + std::to_string(u) + ") is out of range for " +
                                   std::string(DataTypeName(st.type)));
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

// ---------------------------------------------------------------------------------------------
// Request decoding.

// One request input after parsing, before views are built.
struct ParsedInput {
  bool present = false;
  std::vector<int64_t> shape;
  size_t byte_size = 0;
  bool binary = false;
  size_t binary_offset = 0;  // from the end of the JSON header
  size_t owned_index = 0;    // into DecodedRequest::owned, when !binary
};

std::string NameList(const std::vector<TensorSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

int FindSpec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Status ParseShape(const element& value, std::string_view input, std::vector<int64_t>* shape) {
  array arr;
  if (value.get_array().get(arr) != simdjson::SUCCESS) {
    return InvalidArgument(InputContext(input) + "'shape' must be an array of integers");
  }
  for (element dim : arr) {
    int64_t d = 0;
    if (dim.get_int64().get(d) != simdjson::SUCCESS) {
      return InvalidArgument(InputContext(input) + "'shape' must be an array of integers");
    }
    if (d < 0) {
      return InvalidArgument(InputContext(input) + "negative dimension " + std::to_string(d) +
                             " in shape");
    }
    shape->push_back(d);
  }
  return Status::Ok();
}

// Checks the request's `shape` against the declared one; sets the byte size.
Status CheckShape(const TensorSpec& spec, ParsedInput* in) {
  const std::string_view name = spec.name;
  const auto& shape = in->shape;
  if (shape.size() != spec.shape.size()) {
    return InvalidArgument(InputContext(name) + "expected rank " +
                           std::to_string(spec.shape.size()) + " (shape " +
                           ShapeToString(spec.shape) + "), got rank " +
                           std::to_string(shape.size()) + " (shape " + ShapeToString(shape) + ")");
  }
  if (shape.empty()) {
    return InvalidArgument(InputContext(name) + "shape must have a batch dimension");
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (spec.shape[i] >= 0 && spec.shape[i] != shape[i]) {
      return InvalidArgument(InputContext(name) + "dimension " + std::to_string(i) + " must be " +
                             std::to_string(spec.shape[i]) + " (declared shape " +
                             ShapeToString(spec.shape) + "), got shape " + ShapeToString(shape));
    }
  }
  if (shape[0] < 1) {
    return InvalidArgument(InputContext(name) + "batch dimension (shape[0]) must be at least 1");
  }
  const int64_t elements = ElementCount(shape);
  int64_t bytes = 0;
  if (elements < 0 ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(DataTypeSize(spec.datatype)), &bytes)) {
    return InvalidArgument(InputContext(name) + "shape " + ShapeToString(shape) +
                           " has too many elements");
  }
  in->byte_size = static_cast<size_t>(bytes);
  return Status::Ok();
}

Status ParseRequestParameters(const object& root, DecodedRequest* req) {
  element value;
  if (!Find(root, "parameters", &value)) return Status::Ok();
  object params;
  if (value.get_object().get(params) != simdjson::SUCCESS) {
    return InvalidArgument("'parameters' must be an object");
  }
  if (Find(params, "binary_data_output", &value) &&
      value.get_bool().get(req->binary_data_output) != simdjson::SUCCESS) {
    return InvalidArgument("parameter 'binary_data_output' must be a boolean");
  }
  if (Find(params, "timeout", &value)) {
    uint64_t timeout = 0;
    if (value.get_uint64().get(timeout) != simdjson::SUCCESS) {
      return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
    }
    // A day, as batching.timeout_ms allows; beyond it a deadline of received + timeout
    // overflows the clock. 0 sets none, as in Triton (the model's timeout_ms applies).
    constexpr uint64_t kMaxTimeoutUs = 86'400'000'000;
    if (timeout > kMaxTimeoutUs) {
      return InvalidArgument("parameter 'timeout' must be at most " +
                             std::to_string(kMaxTimeoutUs) + " microseconds (a day), got " +
                             std::to_string(timeout));
    }
    if (timeout > 0) req->timeout_us = timeout;
  }
  return Status::Ok();
}

Status ParseRequestedOutputs(const object& root, const ModelSignature& signature,
                             DecodedRequest* req) {
  element value;
  if (!Find(root, "outputs", &value)) return Status::Ok();
  array outputs;
  if (value.get_array().get(outputs) != simdjson::SUCCESS) {
    return InvalidArgument("'outputs' must be an array");
  }
  size_t index = 0;
  for (element item : outputs) {
    const std::string where = "outputs[" + std::to_string(index++) + "]";
    object out;
    if (item.get_object().get(out) != simdjson::SUCCESS) {
      return InvalidArgument(where + " must be an object");
    }
    std::string_view name;
    if (!Find(out, "name", &value) || value.get_string().get(name) != simdjson::SUCCESS) {
      return InvalidArgument(where + ": 'name' must be a string");
    }
    if (FindSpec(signature.outputs, name) < 0) {
      return InvalidArgument("unknown output " + Quoted(name) + " requested (model " +
                             Quoted(signature.name) +
                             " has outputs: " + NameList(signature.outputs) + ")");
    }
    for (const auto& seen : req->outputs) {
      if (seen.name == name) {
        return InvalidArgument("output " + Quoted(name) + " requested more than once");
      }
    }
    RequestedOutput requested{std::string(name), req->binary_data_output};
    element params_value;
    if (Find(out, "parameters", &params_value)) {
      object params;
      if (params_value.get_object().get(params) != simdjson::SUCCESS) {
        return InvalidArgument("output " + Quoted(name) + ": 'parameters' must be an object");
      }
      if (Find(params, "binary_data", &value) &&
          value.get_bool().get(requested.binary) != simdjson::SUCCESS) {
        return InvalidArgument("output " + Quoted(name) +
                               ": parameter 'binary_data' must be a boolean");
      }
    }
    req->outputs.push_back(std::move(requested));
  }
  return Status::Ok();
}

// Parses one element of `inputs` into `parsed` (indexed like signature.inputs).
Status ParseInput(const element& item, size_t index, const ModelSignature& signature,
                  bool has_binary_section, size_t json_size, DecodedRequest* req,
                  std::vector<ParsedInput>* parsed, size_t* binary_cursor) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  object in;
  if (item.get_object().get(in) != simdjson::SUCCESS) {
    return InvalidArgument(where + " must be an object");
  }
  element value;
  std::string_view name;
  if (!Find(in, "name", &value) || value.get_string().get(name) != simdjson::SUCCESS) {
    return InvalidArgument(where + ": 'name' must be a string");
  }
  const int spec_index = FindSpec(signature.inputs, name);
  if (spec_index < 0) {
    return InvalidArgument("unknown input " + Quoted(name) + " (model " + Quoted(signature.name) +
                           " has inputs: " + NameList(signature.inputs) + ")");
  }
  const TensorSpec& spec = signature.inputs[spec_index];
  ParsedInput& p = (*parsed)[spec_index];
  if (p.present) return InvalidArgument("input " + Quoted(name) + " given more than once");
  p.present = true;

  std::string_view type_name;
  if (!Find(in, "datatype", &value) || value.get_string().get(type_name) != simdjson::SUCCESS) {
    return InvalidArgument(InputContext(name) + "'datatype' must be a string");
  }
  const std::optional<DataType> type = DataTypeFromName(type_name);
  if (!type) {
    return InvalidArgument(InputContext(name) + "unsupported datatype " + Quoted(type_name));
  }
  if (*type != spec.datatype) {
    return InvalidArgument(InputContext(name) + "expected datatype " +
                           std::string(DataTypeName(spec.datatype)) + ", got " +
                           std::string(type_name));
  }

  if (!Find(in, "shape", &value)) return InvalidArgument(InputContext(name) + "missing 'shape'");
  RETURN_IF_ERROR(ParseShape(value, name, &p.shape));
  RETURN_IF_ERROR(CheckShape(spec, &p));

  std::optional<uint64_t> binary_size;
  if (Find(in, "parameters", &value)) {
    object params;
    if (value.get_object().get(params) != simdjson::SUCCESS) {
      return InvalidArgument(InputContext(name) + "'parameters' must be an object");
    }
    if (Find(params, "binary_data_size", &value)) {
      uint64_t size = 0;
      if (value.get_uint64().get(size) != simdjson::SUCCESS) {
        return InvalidArgument(InputContext(name) +
                               "'binary_data_size' must be a non-negative integer");
      }
      binary_size = size;
    }
  }
  element data;
  const bool has_data = Find(in, "data", &data);
  if (has_data && binary_size) {
    return InvalidArgument(InputContext(name) + "has both 'data' and 'binary_data_size'");
  }
  if (!has_data && !binary_size) {
    return InvalidArgument(InputContext(name) + "needs 'data' or 'binary_data_size'");
  }

  if (binary_size) {
    if (!has_binary_section) {
      return InvalidArgument(InputContext(name) +
                             "'binary_data_size' given but the request has no "
                             "Inference-Header-Content-Length header");
    }
    if (*binary_size != p.byte_size) {
      return InvalidArgument(InputContext(name) + "'binary_data_size' is " +
                             std::to_string(*binary_size) + " but shape " + ShapeToString(p.shape) +
                             " of " + std::string(type_name) + " needs " +
                             std::to_string(p.byte_size) + " bytes");
    }
    p.binary = true;
    p.binary_offset = *binary_cursor;
    *binary_cursor += p.byte_size;  // cannot overflow: checked against the body size per input
    return Status::Ok();
  }

  p.owned_index = req->owned.size();
  req->owned.emplace_back();
  return DecodeJsonData(data, name, spec.datatype, p.shape, p.byte_size / DataTypeSize(*type),
                        json_size, &req->owned.back());
}

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

struct SelectedOutput {
  const TensorView* view;
  bool binary;
};

Status CheckOutputView(const TensorView& view) {
  const size_t element_size = DataTypeSize(view.datatype);
  if (element_size == 0) return Internal("output " + Quoted(view.name) + ": invalid datatype");
  const int64_t elements = ElementCount(view.shape);
  int64_t bytes = 0;
  if (elements < 0 ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(element_size), &bytes) ||
      static_cast<uint64_t>(bytes) != view.byte_size) {
    return Internal("output " + Quoted(view.name) + ": " + std::to_string(view.byte_size) +
                    " bytes do not match shape " + ShapeToString(view.shape) + " of " +
                    std::string(DataTypeName(view.datatype)));
  }
  if (view.byte_size > 0 && view.data == nullptr) {
    return Internal("output " + Quoted(view.name) + ": no data");
  }
  return Status::Ok();
}

// Length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 if invalid.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
    return k < s.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned char c = byte(i);
  if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (c == 0xe0) return cont(i + 1, 0xa0) && cont(i + 2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xed) return cont(i + 1, 0x80, 0x9f) && cont(i + 2) ? 3 : 0;
  if (c == 0xf0) return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xf4) return cont(i + 1, 0x80, 0x8f) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

bool IsPlainAscii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

}  // namespace

StatusOr<DecodedRequest> DecodeInferRequest(const ModelSignature& signature,
                                            std::shared_ptr<const std::string> body,
                                            std::optional<size_t> header_length) {
  if (body == nullptr) return InvalidArgument("empty request body");
  size_t json_size = body->size();
  if (header_length) {
    if (*header_length > body->size()) {
      return InvalidArgument("Inference-Header-Content-Length " + std::to_string(*header_length) +
                             " exceeds the body size " + std::to_string(body->size()));
    }
    json_size = *header_length;
  }
  const size_t binary_size = body->size() - json_size;

  ParserLease lease;
  element root;
  // parse(std::string) copies only when the string lacks simdjson's padding; a JSON header
  // followed by binary data is always copied (it is small).
  const simdjson::error_code parse_error =
      json_size == body->size() ? lease.get().parse(*body).get(root)
                                : lease.get().parse(body->data(), json_size, true).get(root);
  if (parse_error != simdjson::SUCCESS) {
    return InvalidArgument("malformed JSON: " + std::string(simdjson::error_message(parse_error)));
  }
  object request;
  if (root.get_object().get(request) != simdjson::SUCCESS) {
    return InvalidArgument("request must be a JSON object");
  }

  DecodedRequest req;
  req.body = body;
  element value;
  if (Find(request, "id", &value)) {
    std::string_view id;
    if (value.get_string().get(id) != simdjson::SUCCESS) {
      return InvalidArgument("'id' must be a string");
    }
    req.id = std::string(id);
  }
  RETURN_IF_ERROR(ParseRequestParameters(request, &req));
  RETURN_IF_ERROR(ParseRequestedOutputs(request, signature, &req));

  if (!Find(request, "inputs", &value)) return InvalidArgument("missing 'inputs'");
  array inputs;
  if (value.get_array().get(inputs) != simdjson::SUCCESS) {
    return InvalidArgument("'inputs' must be an array");
  }
  std::vector<ParsedInput> parsed(signature.inputs.size());
  size_t binary_cursor = 0;
  size_t index = 0;
  for (element item : inputs) {
    RETURN_IF_ERROR(ParseInput(item, index++, signature, header_length.has_value(), json_size, &req,
                               &parsed, &binary_cursor));
    if (binary_cursor > binary_size) {
      return InvalidArgument("binary data: inputs declare at least " +
                             std::to_string(binary_cursor) + " bytes but " +
                             std::to_string(binary_size) + " follow the JSON header");
    }
  }
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (!parsed[i].present)
      return InvalidArgument("missing input " + Quoted(signature.inputs[i].name));
  }
  if (binary_cursor != binary_size) {
    return InvalidArgument("binary data: inputs declare " + std::to_string(binary_cursor) +
                           " bytes but " + std::to_string(binary_size) + " follow the JSON header");
  }

  if (!parsed.empty()) req.rows = parsed[0].shape[0];
  for (size_t i = 1; i < parsed.size(); ++i) {
    if (parsed[i].shape[0] != req.rows) {
      return InvalidArgument("input " + Quoted(signature.inputs[i].name) + " has " +
                             std::to_string(parsed[i].shape[0]) + " rows but input " +
                             Quoted(signature.inputs[0].name) + " has " + std::to_string(req.rows));
    }
  }
  if (signature.max_batch > 0 && req.rows > signature.max_batch) {
    return InvalidArgument("batch of " + std::to_string(req.rows) + " rows exceeds max_batch " +
                           std::to_string(signature.max_batch) + " of model " +
                           Quoted(signature.name));
  }

  // Views are built last: `owned` no longer grows, so its buffers stay put.
  const auto* binary_base = reinterpret_cast<const uint8_t*>(body->data()) + json_size;
  req.inputs.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    ParsedInput& p = parsed[i];
    const TensorSpec& spec = signature.inputs[i];
    const uint8_t* data =
        p.binary ? binary_base + p.binary_offset : req.owned[p.owned_index].data();
    req.inputs.push_back({spec.name, spec.datatype, std::move(p.shape), data, p.byte_size});
  }
  return req;
}

StatusOr<EncodedResponse> EncodeInferResponse(const ModelSignature& signature,
                                              const DecodedRequest& request,
                                              const std::vector<TensorView>& outputs) {
  std::vector<SelectedOutput> selected;
  if (request.outputs.empty()) {
    for (const auto& view : outputs) selected.push_back({&view, request.binary_data_output});
  } else {
    for (const auto& requested : request.outputs) {
      if (FindSpec(signature.outputs, requested.name) < 0) {
        return InvalidArgument("unknown output " + Quoted(requested.name) + " requested");
      }
      const TensorView* found = nullptr;
      for (const auto& view : outputs) {
        if (view.name == requested.name) {
          found = &view;
          break;
        }
      }
      if (found == nullptr) {
        return Internal("model " + Quoted(signature.name) + " produced no output " +
                        Quoted(requested.name));
      }
      selected.push_back({found, requested.binary});
    }
  }

  size_t reserve = 128 + request.id.size() + signature.name.size();
  bool any_binary = false;
  for (const auto& s : selected) {
    RETURN_IF_ERROR(CheckOutputView(*s.view));
    reserve += 96 + s.view->name.size();
    if (s.binary) {
      any_binary = true;
      reserve += s.view->byte_size;
    } else {
      reserve +=
          (s.view->byte_size / DataTypeSize(s.view->datatype)) * MaxElementChars(s.view->datatype);
    }
  }

  EncodedResponse response;
  std::string& out = response.body;
  out.reserve(reserve);
  out += "{\"model_name\":";
  AppendJsonString(out, signature.name);
  out += ",\"model_version\":";
  AppendJsonString(out, signature.version);
  if (!request.id.empty()) {
    out += ",\"id\":";
    AppendJsonString(out, request.id);
  }
  out += ",\"outputs\":[";
  for (size_t i = 0; i < selected.size(); ++i) {
    const TensorView& view = *selected[i].view;
    if (i > 0) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, view.name);
    out += ",\"datatype\":\"";
    out += DataTypeName(view.datatype);
    out += "\",\"shape\":";
    out += ShapeToString(view.shape);  // "[a,b]" is already JSON
    if (selected[i].binary) {
      out += ",\"parameters\":{\"binary_data_size\":";
      out += std::to_string(view.byte_size);
      out += '}';
    } else {
      out += ",\"data\":";
      AppendJsonData(out, view.datatype, view.data, view.byte_size / DataTypeSize(view.datatype));
    }
    out += '}';
  }
  out += "]}";

  if (!any_binary) {
    response.content_type = "application/json";
    return response;
  }
  response.content_type = "application/octet-stream";
  response.header_length = out.size();
  for (const auto& s : selected) {
    if (s.binary && s.view->byte_size > 0) {
      out.append(reinterpret_cast<const char*>(s.view->data), s.view->byte_size);
    }
  }
  return response;
}

std::string ErrorJson(std::string_view message) {
  std::string out = "{\"error\":";
  AppendJsonString(out, message);
  out += '}';
  return out;
}

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (IsPlainAscii(c)) {
      size_t j = i + 1;
      while (j < s.size() && IsPlainAscii(static_cast<unsigned char>(s[j]))) ++j;
      out.append(s.data() + i, j - i);
      i = j;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
          break;
      }
      ++i;
      continue;
    }
    // Valid UTF-8 passes through; each byte of an invalid sequence becomes U+FFFD, so the
    // output is always valid JSON.
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  out += '"';
}

}  // namespace packrat
