#include "runtime/model_runner.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <filesystem>
#include <mutex>

#include "common/logging.h"
#include "shm/layout.h"

namespace packrat::runtime {
namespace {

c10::optional<at::ScalarType> ToScalarType(DataType type) {
  switch (type) {
    case DataType::kBool:
      return at::kBool;
    case DataType::kUint8:
      return at::kByte;
    case DataType::kInt8:
      return at::kChar;
    case DataType::kInt16:
      return at::kShort;
    case DataType::kInt32:
      return at::kInt;
    case DataType::kInt64:
      return at::kLong;
    case DataType::kFp16:
      return at::kHalf;
    case DataType::kFp32:
      return at::kFloat;
    case DataType::kFp64:
      return at::kDouble;
    case DataType::kBf16:
      return at::kBFloat16;
    case DataType::kInvalid:
      break;
  }
  return c10::nullopt;
}

DataType FromScalarType(at::ScalarType type) {
  switch (type) {
    case at::kBool:
      return DataType::kBool;
    case at::kByte:
      return DataType::kUint8;
    case at::kChar:
      return DataType::kInt8;
    case at::kShort:
      return DataType::kInt16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kHalf:
      return DataType::kFp16;
    case at::kFloat:
      return DataType::kFp32;
    case at::kDouble:
      return DataType::kFp64;
    case at::kBFloat16:
      return DataType::kBf16;
    default:
      return DataType::kInvalid;
  }
}

// Flattens a forward() result into tensors: a Tensor, or a tuple/list of Tensors.
Status CollectOutputs(const c10::IValue& value, std::vector<at::Tensor>* out) {
  if (value.isTensor()) {
    out->push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const auto& element : value.toTupleRef().elements()) {
      RETURN_IF_ERROR(CollectOutputs(element, out));
    }
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) out->push_back(t);
  } else if (value.isList()) {
    for (const auto& element : value.toListRef()) RETURN_IF_ERROR(CollectOutputs(element, out));
  } else {
    return InvalidArgument("model returned " + value.tagKind() +
                           "; expected a Tensor or a tuple/list of Tensors");
  }
  return Status::Ok();
}

}  // namespace

struct ModelRunner::Impl {
  torch::jit::Module module;
  ModelRunnerOptions options;
};

ModelRunner::ModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelRunner::~ModelRunner() = default;

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const ModelRunnerOptions& options) {
  if (options.threads < 1) return InvalidArgument("threads must be >= 1");
  if (!std::filesystem::exists(options.model_path)) {
    return NotFound("model file '" + options.model_path + "' does not exist");
  }
  // Thread pools are process-wide; set_num_interop_threads may only be called once.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const std::exception& e) {
      PACKRAT_LOG(WARNING) << "set_num_interop_threads: " << e.what();
    }
  });
  at::set_num_threads(options.threads);

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->module = torch::jit::load(options.model_path, torch::kCPU);
    impl->module.eval();
  } catch (const c10::Error& e) {
    return InvalidArgument("cannot load TorchScript model '" + options.model_path +
                           "': " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgument("cannot load TorchScript model '" + options.model_path +
                           "': " + e.what());
  }
  return std::unique_ptr<ModelRunner>(new ModelRunner(std::move(impl)));
}

Status ModelRunner::Run(const std::vector<RawTensor>& inputs, uint8_t* out, size_t out_capacity,
                        std::vector<RawTensor>* outputs) {
  outputs->clear();
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(inputs.size());
    for (const RawTensor& in : inputs) {
      const auto type = ToScalarType(in.datatype);
      if (!type) return InvalidArgument("unsupported input datatype");
      args.emplace_back(torch::from_blob(in.data, in.shape, torch::TensorOptions().dtype(*type)));
    }
    c10::IValue result = impl_->module.forward(args);
    std::vector<at::Tensor> tensors;
    RETURN_IF_ERROR(CollectOutputs(result, &tensors));
    size_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      at::Tensor t = tensors[i];
      const DataType want = i < impl_->options.output_types.size() ? impl_->options.output_types[i]
                                                                   : DataType::kInvalid;
      if (want != DataType::kInvalid && FromScalarType(t.scalar_type()) != want) {
        t = t.to(*ToScalarType(want));
      }
      t = t.contiguous();
      const DataType type = FromScalarType(t.scalar_type());
      if (type == DataType::kInvalid) {
        return InvalidArgument("output " + std::to_string(i) + " has an unsupported dtype");
      }
      const size_t bytes = t.numel() * t.element_size();
      offset = shm::AlignUp(offset);
      if (offset + bytes > out_capacity) {
        return ResourceExhausted("outputs need more than the " + std::to_string(out_capacity) +
                                 "-byte output slab");
      }
      std::memcpy(out + offset, t.data_ptr(), bytes);
      RawTensor raw;
      raw.datatype = type;
      raw.shape.assign(t.sizes().begin(), t.sizes().end());
      raw.data = out + offset;
      raw.byte_size = bytes;
      outputs->push_back(std::move(raw));
      offset += bytes;
    }
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("model failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {  // e.g. torch::jit::JITException from the interpreter
    return InvalidArgument(std::string("model failed: ") + e.what());
  }
  return Status::Ok();
}

Status ModelRunner::Warmup(const std::vector<InputSpec>& inputs,
                           const std::vector<int64_t>& batch_sizes, int iterations) {
  try {
    c10::InferenceMode guard;
    for (int64_t batch : batch_sizes) {
      std::vector<c10::IValue> args;
      for (const InputSpec& spec : inputs) {
        std::vector<int64_t> shape{batch};
        for (int64_t d : spec.row_shape) shape.push_back(d < 0 ? 1 : d);
        args.emplace_back(
            torch::zeros(shape, torch::TensorOptions().dtype(*ToScalarType(spec.datatype))));
      }
      for (int i = 0; i < iterations; ++i) impl_->module.forward(args);
    }
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("warm-up failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Internal(std::string("warm-up failed: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace packrat::runtime
