#include "agent/kserve/request_validation.h"

#include <cstring>
#include <string>

#include "agent/kserve/json_tensor.h"

namespace packrat {

// Built by appending: GCC 12 at -O3 warns (-Wrestrict, a false positive) on "'" + s + "'".
std::string Quoted(std::string_view s) {
  std::string out = "'";
  out.append(s);
  out += '\'';
  return out;
}

std::string InputContext(std::string_view name) {
  std::string out = "input '";
  out.append(name);
  out += "': ";
  return out;
}

namespace {

std::string NameList(const std::vector<TensorSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    if (!out.empty()) out += ", ";
    out += s.name;
  }
  return out;
}

bool HasSpec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (const TensorSpec& spec : specs) {
    if (spec.name == name) return true;
  }
  return false;
}

}  // namespace

StatusOr<size_t> FindInput(const ModelSignature& signature, std::string_view name) {
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    if (signature.inputs[i].name == name) return i;
  }
  return InvalidArgument("unknown input " + Quoted(name) + " (model " + Quoted(signature.name) +
                         " has inputs: " + NameList(signature.inputs) + ")");
}

Status CheckInputDatatype(const TensorSpec& spec, std::string_view type_name) {
  const std::optional<DataType> type = DataTypeFromName(type_name);
  if (!type) {
    return InvalidArgument(InputContext(spec.name) + "unsupported datatype " + Quoted(type_name));
  }
  if (*type != spec.datatype) {
    return InvalidArgument(InputContext(spec.name) + "expected datatype " +
                           std::string(DataTypeName(spec.datatype)) + ", got " +
                           std::string(type_name));
  }
  return Status::Ok();
}

StatusOr<size_t> CheckInputShape(const TensorSpec& spec, const std::vector<int64_t>& shape) {
  const std::string_view name = spec.name;
  for (const int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument(InputContext(name) + "negative dimension " + std::to_string(d) +
                             " in shape");
    }
  }
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
  return static_cast<size_t>(bytes);
}

Status CheckAllInputsGiven(const ModelSignature& signature, const std::vector<bool>& given) {
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    if (i >= given.size() || !given[i]) {
      return InvalidArgument("missing input " + Quoted(signature.inputs[i].name));
    }
  }
  return Status::Ok();
}

StatusOr<int64_t> CheckInputRows(const ModelSignature& signature,
                                 const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return int64_t{0};
  const int64_t rows = shapes[0].at(0);
  for (size_t i = 1; i < shapes.size(); ++i) {
    if (shapes[i].at(0) != rows) {
      return InvalidArgument("input " + Quoted(signature.inputs[i].name) + " has " +
                             std::to_string(shapes[i][0]) + " rows but input " +
                             Quoted(signature.inputs[0].name) + " has " + std::to_string(rows));
    }
  }
  if (signature.max_batch > 0 && rows > signature.max_batch) {
    return InvalidArgument("batch of " + std::to_string(rows) + " rows exceeds max_batch " +
                           std::to_string(signature.max_batch) + " of model " +
                           Quoted(signature.name));
  }
  return rows;
}

Status CheckRequestedOutput(const ModelSignature& signature, std::string_view name,
                            const std::vector<RequestedOutput>& already) {
  if (!HasSpec(signature.outputs, name)) {
    return InvalidArgument("unknown output " + Quoted(name) + " requested (model " +
                           Quoted(signature.name) + " has outputs: " + NameList(signature.outputs) +
                           ")");
  }
  for (const RequestedOutput& seen : already) {
    if (seen.name == name) {
      return InvalidArgument("output " + Quoted(name) + " requested more than once");
    }
  }
  return Status::Ok();
}

namespace {

Status SharedMemoryOff(const std::string& what) {
  return InvalidArgument(what + ": " + std::string(kSharedMemoryOff));
}

}  // namespace

StatusOr<SharedMemorySpan> ResolveInputRegion(const SharedMemoryRegistry* regions,
                                              const SharedMemoryRef& ref, std::string_view input,
                                              size_t byte_size) {
  const std::string what = "input " + Quoted(input);
  if (regions == nullptr || !regions->enabled()) return SharedMemoryOff(what);
  if (ref.byte_size != byte_size) {
    return InvalidArgument(InputContext(input) + "shared_memory_byte_size is " +
                           std::to_string(ref.byte_size) + " but its shape needs " +
                           std::to_string(byte_size) + " bytes");
  }
  return regions->Resolve(ref, what);
}

StatusOr<SharedMemorySpan> ResolveOutputRegion(const SharedMemoryRegistry* regions,
                                               const SharedMemoryRef& ref,
                                               std::string_view output) {
  const std::string what = "output " + Quoted(output);
  if (regions == nullptr || !regions->enabled()) return SharedMemoryOff(what);
  return regions->Resolve(ref, what);
}

Status CopyOutputToRegion(const TensorView& view, const SharedMemorySpan& span) {
  if (view.byte_size > span.byte_size) {
    return InvalidArgument(
        "output " + Quoted(view.name) + " has " + std::to_string(view.byte_size) +
        " bytes but its shared-memory "
        "reference into region " +
        Quoted(span.region->name()) + " holds " + std::to_string(span.byte_size));
  }
  if (view.byte_size > 0) std::memcpy(span.data, view.data, view.byte_size);
  return Status::Ok();
}

StatusOr<std::optional<uint64_t>> CheckTimeoutUs(uint64_t timeout_us) {
  constexpr uint64_t kMaxTimeoutUs = 86'400'000'000;  // a day, as batching.timeout_ms allows
  if (timeout_us > kMaxTimeoutUs) {
    return InvalidArgument("parameter 'timeout' must be at most " + std::to_string(kMaxTimeoutUs) +
                           " microseconds (a day), got " + std::to_string(timeout_us));
  }
  if (timeout_us == 0) return std::optional<uint64_t>();
  return std::optional<uint64_t>(timeout_us);
}

}  // namespace packrat
