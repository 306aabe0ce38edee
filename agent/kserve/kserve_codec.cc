#include "agent/kserve/kserve_codec.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "agent/kserve/json_tensor.h"
#include "agent/kserve/request_validation.h"

namespace packrat {
namespace {

using kserve_internal::AppendJsonData;
using kserve_internal::DecodeJsonData;
using kserve_internal::MaxElementChars;

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

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

// Looks up `key` in `obj`; false if absent.
bool Find(const object& obj, std::string_view key, element* value) {
  return obj.at_key(key).get(*value) == simdjson::SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Request decoding.

// One request input after parsing, before views are built.
struct ParsedInput {
  bool present = false;
  std::vector<int64_t> shape;
  size_t byte_size = 0;
  bool binary = false;
  size_t binary_offset = 0;            // from the end of the JSON header
  size_t owned_index = 0;              // into DecodedRequest::owned, when !binary
  std::optional<size_t> region_index;  // into DecodedRequest::input_regions
};

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
    shape->push_back(d);  // negative dimensions are refused by CheckInputShape
  }
  return Status::Ok();
}

// The shared-memory reference in an input's or output's `params`, if it has one. `context` is
// "input 'x': " or "output 'y': ".
StatusOr<std::optional<SharedMemoryRef>> ParseSharedMemoryRef(const object& params,
                                                              const std::string& context) {
  element value;
  std::optional<SharedMemoryRef> ref;
  if (Find(params, "shared_memory_region", &value)) {
    std::string_view region;
    if (value.get_string().get(region) != simdjson::SUCCESS) {
      return InvalidArgument(context + "'shared_memory_region' must be a string");
    }
    ref.emplace().region = std::string(region);
  }
  for (const auto& [key, field] :
       {std::pair{"shared_memory_byte_size", &SharedMemoryRef::byte_size},
        std::pair{"shared_memory_offset", &SharedMemoryRef::offset}}) {
    if (!Find(params, key, &value)) {
      if (ref && field == &SharedMemoryRef::byte_size) {
        return InvalidArgument(context + "'shared_memory_region' needs 'shared_memory_byte_size'");
      }
      continue;
    }
    if (!ref) return InvalidArgument(context + Quoted(key) + " needs 'shared_memory_region'");
    if (value.get_uint64().get((*ref).*field) != simdjson::SUCCESS) {
      return InvalidArgument(context + Quoted(key) + " must be a non-negative integer");
    }
  }
  return ref;
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
    ASSIGN_OR_RETURN(req->timeout_us, CheckTimeoutUs(timeout));
  }
  return Status::Ok();
}

Status ParseRequestedOutputs(const object& root, const ModelSignature& signature,
                             const SharedMemoryRegistry* regions, DecodedRequest* req) {
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
    RETURN_IF_ERROR(CheckRequestedOutput(signature, name, req->outputs));
    RequestedOutput requested{std::string(name), req->binary_data_output, std::nullopt};
    element params_value;
    if (Find(out, "parameters", &params_value)) {
      object params;
      if (params_value.get_object().get(params) != simdjson::SUCCESS) {
        return InvalidArgument("output " + Quoted(name) + ": 'parameters' must be an object");
      }
      const bool binary_given = Find(params, "binary_data", &value);
      if (binary_given && value.get_bool().get(requested.binary) != simdjson::SUCCESS) {
        return InvalidArgument("output " + Quoted(name) +
                               ": parameter 'binary_data' must be a boolean");
      }
      const std::string context = "output " + Quoted(name) + ": ";
      ASSIGN_OR_RETURN(const std::optional<SharedMemoryRef> ref,
                       ParseSharedMemoryRef(params, context));
      if (ref) {
        if (binary_given && requested.binary) {
          return InvalidArgument(context + "has both 'binary_data' and 'shared_memory_region'");
        }
        ASSIGN_OR_RETURN(requested.region, ResolveOutputRegion(regions, *ref, name));
        requested.binary = false;
      }
    }
    req->outputs.push_back(std::move(requested));
  }
  return Status::Ok();
}

// Parses one element of `inputs` into `parsed` (indexed like signature.inputs).
Status ParseInput(const element& item, size_t index, const ModelSignature& signature,
                  bool has_binary_section, size_t json_size, const SharedMemoryRegistry* regions,
                  DecodedRequest* req, std::vector<ParsedInput>* parsed, size_t* binary_cursor) {
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
  ASSIGN_OR_RETURN(const size_t spec_index, FindInput(signature, name));
  const TensorSpec& spec = signature.inputs[spec_index];
  ParsedInput& p = (*parsed)[spec_index];
  if (p.present) return InvalidArgument("input " + Quoted(name) + " given more than once");
  p.present = true;

  std::string_view type_name;
  if (!Find(in, "datatype", &value) || value.get_string().get(type_name) != simdjson::SUCCESS) {
    return InvalidArgument(InputContext(name) + "'datatype' must be a string");
  }
  RETURN_IF_ERROR(CheckInputDatatype(spec, type_name));

  if (!Find(in, "shape", &value)) return InvalidArgument(InputContext(name) + "missing 'shape'");
  RETURN_IF_ERROR(ParseShape(value, name, &p.shape));
  ASSIGN_OR_RETURN(p.byte_size, CheckInputShape(spec, p.shape));

  std::optional<uint64_t> binary_size;
  std::optional<SharedMemoryRef> region;
  if (Find(in, "parameters", &value)) {
    object params;
    if (value.get_object().get(params) != simdjson::SUCCESS) {
      return InvalidArgument(InputContext(name) + "'parameters' must be an object");
    }
    ASSIGN_OR_RETURN(region, ParseSharedMemoryRef(params, InputContext(name)));
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
  if (region) {
    if (has_data || binary_size) {
      return InvalidArgument(InputContext(name) + "has 'shared_memory_region' and also " +
                             (has_data ? "'data'" : "'binary_data_size'"));
    }
    ASSIGN_OR_RETURN(SharedMemorySpan span,
                     ResolveInputRegion(regions, *region, name, p.byte_size));
    p.region_index = req->input_regions.size();
    req->input_regions.push_back(std::move(span));
    return Status::Ok();
  }
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
  return DecodeJsonData(data, name, spec.datatype, p.shape,
                        p.byte_size / DataTypeSize(spec.datatype), json_size, &req->owned.back());
}

struct SelectedOutput {
  const TensorView* view;
  bool binary;
  const SharedMemorySpan* region;  // null: the output travels in the response
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

}  // namespace

StatusOr<DecodedRequest> DecodeInferRequest(const ModelSignature& signature,
                                            std::shared_ptr<const std::string> body,
                                            std::optional<size_t> header_length,
                                            const SharedMemoryRegistry* regions) {
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
  RETURN_IF_ERROR(ParseRequestedOutputs(request, signature, regions, &req));

  if (!Find(request, "inputs", &value)) return InvalidArgument("missing 'inputs'");
  array inputs;
  if (value.get_array().get(inputs) != simdjson::SUCCESS) {
    return InvalidArgument("'inputs' must be an array");
  }
  std::vector<ParsedInput> parsed(signature.inputs.size());
  size_t binary_cursor = 0;
  size_t index = 0;
  for (element item : inputs) {
    RETURN_IF_ERROR(ParseInput(item, index++, signature, header_length.has_value(), json_size,
                               regions, &req, &parsed, &binary_cursor));
    if (binary_cursor > binary_size) {
      return InvalidArgument("binary data: inputs declare at least " +
                             std::to_string(binary_cursor) + " bytes but " +
                             std::to_string(binary_size) + " follow the JSON header");
    }
  }
  std::vector<bool> given(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) given[i] = parsed[i].present;
  RETURN_IF_ERROR(CheckAllInputsGiven(signature, given));
  if (binary_cursor != binary_size) {
    return InvalidArgument("binary data: inputs declare " + std::to_string(binary_cursor) +
                           " bytes but " + std::to_string(binary_size) + " follow the JSON header");
  }

  std::vector<std::vector<int64_t>> shapes(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) shapes[i] = std::move(parsed[i].shape);
  ASSIGN_OR_RETURN(req.rows, CheckInputRows(signature, shapes));

  // Views are built last: `owned` no longer grows, so its buffers stay put.
  const auto* binary_base = reinterpret_cast<const uint8_t*>(body->data()) + json_size;
  req.inputs.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    ParsedInput& p = parsed[i];
    const TensorSpec& spec = signature.inputs[i];
    const uint8_t* data = p.region_index ? req.input_regions[*p.region_index].data
                          : p.binary     ? binary_base + p.binary_offset
                                         : req.owned[p.owned_index].data();
    req.inputs.push_back({spec.name, spec.datatype, std::move(shapes[i]), data, p.byte_size});
  }
  return req;
}

StatusOr<EncodedResponse> EncodeInferResponse(const ModelSignature& signature,
                                              const DecodedRequest& request,
                                              const std::vector<TensorView>& outputs) {
  std::vector<SelectedOutput> selected;
  if (request.outputs.empty()) {
    for (const auto& view : outputs) {
      selected.push_back({&view, request.binary_data_output, nullptr});
    }
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
      selected.push_back(
          {found, requested.binary, requested.region ? &*requested.region : nullptr});
    }
  }

  size_t reserve = 128 + request.id.size() + signature.name.size();
  bool any_binary = false;
  for (const auto& s : selected) {
    RETURN_IF_ERROR(CheckOutputView(*s.view));
    reserve += 96 + s.view->name.size();
    if (s.region != nullptr) {
      RETURN_IF_ERROR(CopyOutputToRegion(*s.view, *s.region));
      reserve += s.region->region->name().size();
    } else if (s.binary) {
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
    if (const SharedMemorySpan* region = selected[i].region) {
      out += ",\"parameters\":{\"shared_memory_region\":";
      AppendJsonString(out, region->region->name());
      out += ",\"shared_memory_byte_size\":";
      out += std::to_string(view.byte_size);
      if (region->offset != 0) {
        out += ",\"shared_memory_offset\":";
        out += std::to_string(region->offset);
      }
      out += '}';
    } else if (selected[i].binary) {
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

}  // namespace packrat
