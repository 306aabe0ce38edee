#include "agent/grpc/infer_codec.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "agent/kserve/request_validation.h"

namespace packrat {
namespace {

using inference::InferTensorContents;
using inference::ModelInferRequest;

// The member name of `type` in InferTensorContents, or "" for types without one.
std::string_view MemberFor(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return "int_contents";
    case DataType::kInt64:
      return "int64_contents";
    case DataType::kUint8:
      return "uint_contents";
    case DataType::kFp32:
      return "fp32_contents";
    case DataType::kFp64:
      return "fp64_contents";
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid:
      break;
  }
  return "";
}

size_t MemberSize(const InferTensorContents& c, DataType type) {
  switch (type) {
    case DataType::kBool:
      return static_cast<size_t>(c.bool_contents_size());
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return static_cast<size_t>(c.int_contents_size());
    case DataType::kInt64:
      return static_cast<size_t>(c.int64_contents_size());
    case DataType::kUint8:
      return static_cast<size_t>(c.uint_contents_size());
    case DataType::kFp32:
      return static_cast<size_t>(c.fp32_contents_size());
    case DataType::kFp64:
      return static_cast<size_t>(c.fp64_contents_size());
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid:
      break;
  }
  return 0;
}

size_t TotalSize(const InferTensorContents& c) {
  return static_cast<size_t>(c.bool_contents_size()) + c.int_contents_size() +
         c.int64_contents_size() + c.uint_contents_size() + c.uint64_contents_size() +
         c.fp32_contents_size() + c.fp64_contents_size() + c.bytes_contents_size();
}

// Appends `values` as elements of type Out, each checked to fit.
template <typename Out, typename Values>
Status Narrow(const Values& values, std::string_view input, DataType type, uint8_t* out) {
  size_t i = 0;
  for (const auto v : values) {
    using In = std::remove_cv_t<decltype(v)>;
    if constexpr (!std::is_same_v<In, Out>) {  // a narrowing integer conversion
      if (!std::in_range<Out>(v)) {
        return InvalidArgument(InputContext(input) + "element " + std::to_string(i) + " (" +
                               std::to_string(v) + ") is out of range for " +
                               std::string(DataTypeName(type)));
      }
    }
    const Out converted = static_cast<Out>(v);
    std::memcpy(out + i * sizeof(Out), &converted, sizeof(Out));
    ++i;
  }
  return Status::Ok();
}

// Converts the typed contents of input `spec` (`count` elements) into `out`.
Status ConvertContents(const InferTensorContents& c, const TensorSpec& spec, size_t count,
                       std::vector<uint8_t>* out) {
  const std::string_view member = MemberFor(spec.datatype);
  if (member.empty()) {
    return InvalidArgument(InputContext(spec.name) + std::string(DataTypeName(spec.datatype)) +
                           " has no typed contents: send it in raw_input_contents");
  }
  const size_t have = MemberSize(c, spec.datatype);
  if (TotalSize(c) != have) {
    return InvalidArgument(InputContext(spec.name) + "contents of a " +
                           std::string(DataTypeName(spec.datatype)) + " tensor go in " +
                           std::string(member) + " only");
  }
  if (have != count) {
    return InvalidArgument(InputContext(spec.name) + "expected " + std::to_string(count) +
                           " values in contents." + std::string(member) + ", got " +
                           std::to_string(have));
  }
  out->resize(count * DataTypeSize(spec.datatype));
  uint8_t* data = out->data();
  switch (spec.datatype) {
    case DataType::kBool:
      return Narrow<bool>(c.bool_contents(), spec.name, spec.datatype, data);
    case DataType::kInt8:
      return Narrow<int8_t>(c.int_contents(), spec.name, spec.datatype, data);
    case DataType::kInt16:
      return Narrow<int16_t>(c.int_contents(), spec.name, spec.datatype, data);
    case DataType::kInt32:
      return Narrow<int32_t>(c.int_contents(), spec.name, spec.datatype, data);
    case DataType::kInt64:
      return Narrow<int64_t>(c.int64_contents(), spec.name, spec.datatype, data);
    case DataType::kUint8:
      return Narrow<uint8_t>(c.uint_contents(), spec.name, spec.datatype, data);
    case DataType::kFp32:
      return Narrow<float>(c.fp32_contents(), spec.name, spec.datatype, data);
    case DataType::kFp64:
      return Narrow<double>(c.fp64_contents(), spec.name, spec.datatype, data);
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid:
      break;
  }
  return Internal(InputContext(spec.name) + "no conversion");
}

// A non-negative integer parameter: int64_param (tritonclient's) or uint64_param; nullopt for
// any other.
std::optional<uint64_t> Unsigned(const inference::InferParameter& p) {
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<uint64_t>(p.int64_param());
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) return p.uint64_param();
  return std::nullopt;
}

Status ParseParameters(const ModelInferRequest& request, DecodedRequest* req) {
  const auto it = request.parameters().find("timeout");
  if (it == request.parameters().end()) return Status::Ok();
  const std::optional<uint64_t> timeout = Unsigned(it->second);
  if (!timeout) {
    return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
  }
  ASSIGN_OR_RETURN(req->timeout_us, CheckTimeoutUs(*timeout));
  return Status::Ok();
}

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

// `p`, a non-negative integer parameter, as `key` of `context`'s.
StatusOr<uint64_t> UnsignedParameter(const inference::InferParameter& p, const std::string& context,
                                     std::string_view key) {
  if (const std::optional<uint64_t> v = Unsigned(p)) return *v;
  return InvalidArgument(context + Quoted(key) + " must be a non-negative integer");
}

// The shared-memory reference in an input's or output's `params`, if it has one. `context` is
// "input 'x': " or "output 'y': ". The same rules as REST's (kserve_codec.cc).
StatusOr<std::optional<SharedMemoryRef>> ParseSharedMemoryRef(const Parameters& params,
                                                              const std::string& context) {
  std::optional<SharedMemoryRef> ref;
  if (const auto it = params.find("shared_memory_region"); it != params.end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
      return InvalidArgument(context + "'shared_memory_region' must be a string");
    }
    ref.emplace().region = it->second.string_param();
  }
  const auto size = params.find("shared_memory_byte_size");
  const auto offset = params.find("shared_memory_offset");
  if (!ref) {
    if (size != params.end() || offset != params.end()) {
      return InvalidArgument(
          context +
          Quoted(size != params.end() ? "shared_memory_byte_size" : "shared_memory_offset") +
          " needs 'shared_memory_region'");
    }
    return ref;
  }
  if (size == params.end()) {
    return InvalidArgument(context + "'shared_memory_region' needs 'shared_memory_byte_size'");
  }
  ASSIGN_OR_RETURN(ref->byte_size,
                   UnsignedParameter(size->second, context, "shared_memory_byte_size"));
  if (offset != params.end()) {
    ASSIGN_OR_RETURN(ref->offset,
                     UnsignedParameter(offset->second, context, "shared_memory_offset"));
  }
  return ref;
}

Status ParseRequestedOutputs(const ModelInferRequest& request, const ModelSignature& signature,
                             const SharedMemoryRegistry* regions, DecodedRequest* req) {
  for (const auto& out : request.outputs()) {
    RETURN_IF_ERROR(CheckRequestedOutput(signature, out.name(), req->outputs));
    if (out.parameters().count("classification") > 0) {
      return InvalidArgument("output " + Quoted(out.name()) +
                             ": parameter 'classification' is not supported");
    }
    RequestedOutput requested{out.name(), false, std::nullopt};
    ASSIGN_OR_RETURN(const std::optional<SharedMemoryRef> ref,
                     ParseSharedMemoryRef(out.parameters(), "output " + Quoted(out.name()) + ": "));
    if (ref) {
      ASSIGN_OR_RETURN(requested.region, ResolveOutputRegion(regions, *ref, out.name()));
    }
    req->outputs.push_back(std::move(requested));
  }
  return Status::Ok();
}

// Where one input's bytes are, before views are built.
struct InputData {
  bool given = false;
  size_t byte_size = 0;
  const std::string* raw = nullptr;    // a raw_input_contents entry, or
  std::optional<size_t> region_index;  // into DecodedRequest::input_regions, or
  size_t owned_index = 0;              // into DecodedRequest::owned
};

}  // namespace

StatusOr<DecodedRequest> DecodeModelInferRequest(const ModelSignature& signature,
                                                 const ModelInferRequest& request,
                                                 std::shared_ptr<const void> keepalive,
                                                 const SharedMemoryRegistry* regions) {
  DecodedRequest req;
  req.id = request.id();
  req.keepalive = std::move(keepalive);
  RETURN_IF_ERROR(ParseParameters(request, &req));
  RETURN_IF_ERROR(ParseRequestedOutputs(request, signature, regions, &req));

  std::vector<InputData> data(signature.inputs.size());
  std::vector<std::vector<int64_t>> shapes(signature.inputs.size());
  int raw_next = 0;
  for (const ModelInferRequest::InferInputTensor& in : request.inputs()) {
    ASSIGN_OR_RETURN(const size_t index, FindInput(signature, in.name()));
    const TensorSpec& spec = signature.inputs[index];
    InputData& d = data[index];
    if (d.given) return InvalidArgument("input " + Quoted(in.name()) + " given more than once");
    d.given = true;
    RETURN_IF_ERROR(CheckInputDatatype(spec, in.datatype()));
    shapes[index].assign(in.shape().begin(), in.shape().end());
    ASSIGN_OR_RETURN(d.byte_size, CheckInputShape(spec, shapes[index]));

    ASSIGN_OR_RETURN(const std::optional<SharedMemoryRef> ref,
                     ParseSharedMemoryRef(in.parameters(), InputContext(spec.name)));
    if (ref) {  // takes no raw_input_contents entry (Triton's rule)
      if (in.has_contents()) {
        return InvalidArgument(InputContext(spec.name) +
                               "has 'shared_memory_region' and also typed contents");
      }
      ASSIGN_OR_RETURN(SharedMemorySpan span,
                       ResolveInputRegion(regions, *ref, spec.name, d.byte_size));
      d.region_index = req.input_regions.size();
      req.input_regions.push_back(std::move(span));
      continue;
    }
    if (in.has_contents()) {
      d.owned_index = req.owned.size();
      req.owned.emplace_back();
      RETURN_IF_ERROR(ConvertContents(
          in.contents(), spec, d.byte_size / DataTypeSize(spec.datatype), &req.owned.back()));
      continue;
    }
    if (raw_next >= request.raw_input_contents_size()) {
      return InvalidArgument(InputContext(spec.name) +
                             "no data: neither typed contents nor a raw_input_contents entry");
    }
    d.raw = &request.raw_input_contents(raw_next);
    if (d.raw->size() != d.byte_size) {
      return InvalidArgument(
          InputContext(spec.name) + "raw_input_contents[" + std::to_string(raw_next) + "] has " +
          std::to_string(d.raw->size()) + " bytes but shape " + ShapeToString(shapes[index]) +
          " of " + std::string(in.datatype()) + " needs " + std::to_string(d.byte_size) + " bytes");
    }
    ++raw_next;
  }
  if (raw_next != request.raw_input_contents_size()) {
    return InvalidArgument(std::to_string(request.raw_input_contents_size()) +
                           " raw_input_contents entries but " + std::to_string(raw_next) +
                           " inputs without typed contents");
  }
  std::vector<bool> given(data.size());
  for (size_t i = 0; i < data.size(); ++i) given[i] = data[i].given;
  RETURN_IF_ERROR(CheckAllInputsGiven(signature, given));
  ASSIGN_OR_RETURN(req.rows, CheckInputRows(signature, shapes));

  // Views are built last: `owned` no longer grows, so its buffers stay put.
  req.inputs.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const TensorSpec& spec = signature.inputs[i];
    const InputData& d = data[i];
    const uint8_t* bytes = d.region_index     ? req.input_regions[*d.region_index].data
                           : d.raw != nullptr ? reinterpret_cast<const uint8_t*>(d.raw->data())
                                              : req.owned[d.owned_index].data();
    req.inputs.push_back({spec.name, spec.datatype, std::move(shapes[i]), bytes, d.byte_size});
  }
  return req;
}

Status EncodeModelInferResponse(const ModelSignature& signature, const DecodedRequest& request,
                                const std::vector<Tensor>& outputs,
                                inference::ModelInferResponse* response) {
  std::vector<const Tensor*> selected;
  std::vector<const SharedMemorySpan*> regions;  // per selected output; null: in the response
  if (request.outputs.empty()) {
    for (const Tensor& t : outputs) selected.push_back(&t);
    regions.resize(selected.size());
  } else {
    for (const RequestedOutput& requested : request.outputs) {
      const Tensor* found = nullptr;
      for (const Tensor& t : outputs) {
        if (t.name == requested.name) {
          found = &t;
          break;
        }
      }
      if (found == nullptr) {
        return Internal("model " + Quoted(signature.name) + " produced no output " +
                        Quoted(requested.name));
      }
      selected.push_back(found);
      regions.push_back(requested.region ? &*requested.region : nullptr);
    }
  }
  response->set_model_name(signature.name);
  response->set_model_version(signature.version);
  if (!request.id.empty()) response->set_id(request.id);
  for (size_t i = 0; i < selected.size(); ++i) {
    const Tensor* t = selected[i];
    const int64_t elements = ElementCount(t->shape);
    if (elements < 0 ||
        static_cast<uint64_t>(elements) * DataTypeSize(t->datatype) != t->bytes.size()) {
      return Internal("output " + Quoted(t->name) + ": " + std::to_string(t->bytes.size()) +
                      " bytes do not match shape " + ShapeToString(t->shape) + " of " +
                      std::string(DataTypeName(t->datatype)));
    }
    inference::ModelInferResponse::InferOutputTensor* out = response->add_outputs();
    out->set_name(t->name);
    out->set_datatype(std::string(DataTypeName(t->datatype)));
    for (const int64_t d : t->shape) out->add_shape(d);
    if (const SharedMemorySpan* region = regions[i]) {
      // An empty raw entry keeps raw_output_contents[i] beside outputs[i] (Triton's rule).
      RETURN_IF_ERROR(CopyOutputToRegion(t->View(), *region));
      auto& params = *out->mutable_parameters();
      params["shared_memory_region"].set_string_param(region->region->name());
      params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(t->bytes.size()));
      if (region->offset != 0) {
        params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(region->offset));
      }
      response->add_raw_output_contents();
      continue;
    }
    response->add_raw_output_contents(reinterpret_cast<const char*>(t->bytes.data()),
                                      t->bytes.size());
  }
  return Status::Ok();
}

}  // namespace packrat
