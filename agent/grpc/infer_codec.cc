#include "agent/grpc/infer_codec.h"

#include <cstdint>
#include <cstring>
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

Status ParseParameters(const ModelInferRequest& request, DecodedRequest* req) {
  const auto it = request.parameters().find("timeout");
  if (it == request.parameters().end()) return Status::Ok();
  const inference::InferParameter& p = it->second;
  uint64_t timeout = 0;
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    timeout = static_cast<uint64_t>(p.int64_param());
  } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    timeout = p.uint64_param();
  } else {
    return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
  }
  ASSIGN_OR_RETURN(req->timeout_us, CheckTimeoutUs(timeout));
  return Status::Ok();
}

Status ParseRequestedOutputs(const ModelInferRequest& request, const ModelSignature& signature,
                             DecodedRequest* req) {
  for (const auto& out : request.outputs()) {
    RETURN_IF_ERROR(CheckRequestedOutput(signature, out.name(), req->outputs));
    if (out.parameters().count("classification") > 0) {
      return InvalidArgument("output " + Quoted(out.name()) +
                             ": parameter 'classification' is not supported");
    }
    req->outputs.push_back({out.name(), false});
  }
  return Status::Ok();
}

// Where one input's bytes are, before views are built.
struct InputData {
  bool given = false;
  size_t byte_size = 0;
  const std::string* raw = nullptr;  // a raw_input_contents entry, or
  size_t owned_index = 0;            // into DecodedRequest::owned
};

}  // namespace

StatusOr<DecodedRequest> DecodeModelInferRequest(const ModelSignature& signature,
                                                 const ModelInferRequest& request,
                                                 std::shared_ptr<const void> keepalive) {
  DecodedRequest req;
  req.id = request.id();
  req.keepalive = std::move(keepalive);
  RETURN_IF_ERROR(ParseParameters(request, &req));
  RETURN_IF_ERROR(ParseRequestedOutputs(request, signature, &req));

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
    const uint8_t* bytes = data[i].raw != nullptr
                               ? reinterpret_cast<const uint8_t*>(data[i].raw->data())
                               : req.owned[data[i].owned_index].data();
    req.inputs.push_back(
        {spec.name, spec.datatype, std::move(shapes[i]), bytes, data[i].byte_size});
  }
  return req;
}

Status EncodeModelInferResponse(const ModelSignature& signature, const DecodedRequest& request,
                                const std::vector<Tensor>& outputs,
                                inference::ModelInferResponse* response) {
  std::vector<const Tensor*> selected;
  if (request.outputs.empty()) {
    for (const Tensor& t : outputs) selected.push_back(&t);
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
    }
  }
  response->set_model_name(signature.name);
  response->set_model_version(signature.version);
  if (!request.id.empty()) response->set_id(request.id);
  for (const Tensor* t : selected) {
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
    response->add_raw_output_contents(reinterpret_cast<const char*>(t->bytes.data()),
                                      t->bytes.size());
  }
  return Status::Ok();
}

}  // namespace packrat
