#include "runtime/model_runner.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <algorithm>
#include <cstdio>
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

// A deep copy of `original` (eval mode) with `opt` applied: weights to bf16, 4-D weights to
// channels-last, then frozen and rewritten for inference.
torch::jit::Module Optimize(const torch::jit::Module& original, const Optimization& opt) {
  torch::jit::Module m = original.deepcopy();
  if (opt.bf16) m.to(at::kBFloat16);
  if (opt.channels_last) {
    for (at::Tensor p : m.parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
    for (at::Tensor b : m.buffers()) {
      if (b.dim() == 4) b.set_data(b.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  if (opt.freeze) {
    m = torch::jit::freeze(m);
    m = torch::jit::optimize_for_inference(m);
  }
  return m;
}

// The inputs as the optimised module wants them: floating inputs in bf16, 4-D inputs
// channels-last. Without an optimisation the tensors pass through untouched.
void PrepareInputs(const Optimization& opt, std::vector<c10::IValue>* args) {
  if (!opt.bf16 && !opt.channels_last) return;
  for (c10::IValue& v : *args) {
    at::Tensor t = v.toTensor();
    if (opt.bf16 && t.is_floating_point() && t.scalar_type() != at::kBFloat16) {
      t = t.to(at::kBFloat16);
    }
    if (opt.channels_last && t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    v = t;
  }
}

std::vector<c10::IValue> RandomInputs(const std::vector<InputSpec>& specs, int64_t batch) {
  std::vector<c10::IValue> args;
  for (const InputSpec& spec : specs) {
    std::vector<int64_t> shape{batch};
    for (int64_t d : spec.row_shape) shape.push_back(d < 0 ? 1 : d);
    const auto type = *ToScalarType(spec.datatype);
    at::Tensor t;
    if (at::isFloatingType(type)) {
      t = torch::randn(shape).to(type);
    } else if (type == at::kBool) {
      t = torch::randint(0, 2, shape).to(at::kBool);
    } else {
      t = torch::randint(0, 100, shape).to(type);
    }
    args.emplace_back(t);
  }
  return args;
}

// Runs both modules on the same random inputs and fills the report's error figures.
Status Compare(torch::jit::Module& original, torch::jit::Module& optimized,
               const Optimization& opt, const ModelRunnerOptions& options, LoadReport* report) {
  c10::InferenceMode guard;
  torch::manual_seed(20261122);
  std::vector<c10::IValue> args = RandomInputs(options.inputs, options.guard.samples);
  std::vector<at::Tensor> want, got;
  RETURN_IF_ERROR(CollectOutputs(original.forward(args), &want));
  PrepareInputs(opt, &args);
  RETURN_IF_ERROR(CollectOutputs(optimized.forward(args), &got));
  if (want.size() != got.size()) return Internal("the optimised model returns other outputs");
  report->checked = true;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!want[i].is_floating_point()) {
      continue;  // integer outputs (argmax ids) are judged by the float ones they come from
    }
    const at::Tensor a = want[i].to(at::kFloat).contiguous();
    const at::Tensor b = got[i].to(at::kFloat).contiguous();
    if (a.sizes() != b.sizes()) return Internal("the optimised model's output shapes differ");
    const double abs_error = (a - b).abs().max().item<double>();
    const double scale = std::max(a.abs().max().item<double>(), 1e-12);
    report->max_abs_error = std::max(report->max_abs_error, abs_error);
    report->max_rel_error = std::max(report->max_rel_error, abs_error / scale);
    if (a.dim() == 2 && a.size(1) > 1) {
      const double agree = a.argmax(1).eq(b.argmax(1)).to(at::kFloat).mean().item<double>();
      report->top1_agreement =
          report->top1_agreement < 0 ? agree : std::min(report->top1_agreement, agree);
    }
  }
  return Status::Ok();
}

}  // namespace

std::string Optimization::Key() const {
  std::string key = bf16 ? "bf16" : "fp32";
  if (channels_last) key += "+cl";
  if (freeze) key += "+frozen";
  return key;
}

std::string LoadReport::ToString() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "kernel=%s checked=%d max_abs_error=%.6g max_rel_error=%.6g top1_agreement=%.4g "
                "fallback=%d",
                kernel.c_str(), checked ? 1 : 0, max_abs_error, max_rel_error, top1_agreement,
                fallback ? 1 : 0);
  return buf;
}

struct ModelRunner::Impl {
  torch::jit::Module module;
  ModelRunnerOptions options;
  Optimization active;  // what `module` expects (none after a fallback)
  LoadReport report;
};

const LoadReport& ModelRunner::report() const { return impl_->report; }

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
  const Optimization& opt = options.optimization;
  if (!opt.any()) return std::unique_ptr<ModelRunner>(new ModelRunner(std::move(impl)));
  try {
    torch::jit::Module optimized = Optimize(impl->module, opt);
    LoadReport& report = impl->report;
    report.kernel = opt.Key();
    bool within = true;
    if (options.guard.samples > 0 && !options.inputs.empty()) {
      RETURN_IF_ERROR(Compare(impl->module, optimized, opt, options, &report));
      within = report.max_rel_error <= options.guard.max_rel_error &&
               (report.top1_agreement < 0 ||
                report.top1_agreement >= options.guard.min_top1_agreement);
    }
    PACKRAT_LOG(INFO) << "optimised " << options.model_path << ": " << report.ToString();
    if (within) {
      impl->module = std::move(optimized);
      impl->active = opt;
    } else if (options.guard.strict) {
      return FailedPrecondition("the " + opt.Key() + " model is beyond the accuracy tolerance " +
                                "(max_rel_error " + std::to_string(report.max_rel_error) +
                                " > " + std::to_string(options.guard.max_rel_error) +
                                " or top1_agreement " + std::to_string(report.top1_agreement) +
                                " < " + std::to_string(options.guard.min_top1_agreement) +
                                ") and accuracy.strict is set");
    } else {
      PACKRAT_LOG(WARNING) << "the " << opt.Key() << " model of " << options.model_path
                           << " is beyond the accuracy tolerance (" << report.ToString()
                           << "); serving the FP32 original instead";
      report.fallback = true;
      report.kernel = "fp32";
    }
  } catch (const c10::Error& e) {
    return InvalidArgument("cannot optimise '" + options.model_path + "' (" + opt.Key() +
                           "): " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgument("cannot optimise '" + options.model_path + "' (" + opt.Key() +
                           "): " + e.what());
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
    PrepareInputs(impl_->active, &args);
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
      PrepareInputs(impl_->active, &args);
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
