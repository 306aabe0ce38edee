#include "runtime/model_runner.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>

#include "common/logging.h"
#include "shm/layout.h"

namespace packrat::runtime {
namespace {

std::optional<at::ScalarType> ToScalarType(DataType type) {
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
  return std::nullopt;
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

// The stages of a staged model (its `stages` submodule's children, in order), or none.
std::vector<torch::jit::Module> StagesOf(const torch::jit::Module& module) {
  std::vector<torch::jit::Module> stages;
  if (!module.hasattr("stages") || !module.attr("stages").isModule()) return stages;
  const torch::jit::Module list = module.attr("stages").toModule();
  std::vector<std::pair<long, torch::jit::Module>> numbered;
  for (const auto& child : list.named_children()) {
    char* end = nullptr;
    const long index = std::strtol(child.name.c_str(), &end, 10);
    if (child.name.empty() || *end != '\0') return {};  // not a ModuleList
    numbered.emplace_back(index, child.value);
  }
  std::sort(numbered.begin(), numbered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, stage] : numbered) stages.push_back(stage);
  return stages;
}

// A model as it runs: the whole module, or (staged models) its stages, which Packrat calls one
// by one instead of forward().
struct Executable {
  torch::jit::Module whole;
  std::vector<torch::jit::Module> stages;
};

// Freezes a module and applies libtorch's inference rewrites (oneDNN-friendly fusions).
torch::jit::Module Freeze(const torch::jit::Module& m) {
  torch::jit::Module frozen = torch::jit::freeze(m);
  return torch::jit::optimize_for_inference(frozen);
}

// A deep copy of `original` (eval mode) with `opt` applied: weights to bf16, 4-D weights to
// channels-last, then frozen and rewritten for inference. Staged models are frozen stage by
// stage (freezing the whole would inline the stages away).
Executable Optimize(const torch::jit::Module& original, const Optimization& opt) {
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
  Executable e;
  e.stages = StagesOf(m);
  if (opt.freeze) {
    if (e.stages.empty()) {
      m = Freeze(m);
    } else {
      for (torch::jit::Module& stage : e.stages) stage = Freeze(stage);
    }
  }
  e.whole = std::move(m);
  return e;
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

// Runs the whole model: forward(), or the stages in order.
c10::IValue Forward(Executable& model, std::vector<c10::IValue> args) {
  if (model.stages.empty()) return model.whole.forward(std::move(args));
  c10::IValue x = model.stages[0].forward(std::move(args));
  for (size_t k = 1; k < model.stages.size(); ++k) x = model.stages[k].forward({x});
  return x;
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
Status Compare(Executable& original, Executable& optimized, const Optimization& opt,
               const ModelRunnerOptions& options, LoadReport* report) {
  c10::InferenceMode guard;
  torch::manual_seed(20261122);
  std::vector<c10::IValue> args = RandomInputs(options.inputs, options.guard.samples);
  std::vector<at::Tensor> want, got;
  RETURN_IF_ERROR(CollectOutputs(Forward(original, args), &want));
  PrepareInputs(opt, &args);
  RETURN_IF_ERROR(CollectOutputs(Forward(optimized, args), &got));
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
  Executable model;
  ModelRunnerOptions options;
  Optimization active;  // what `model` expects (none after a fallback)
  LoadReport report;
  // The batch running stage by stage (staged models): its activations after `done` stages.
  c10::IValue current;
  int done = 0;
  int64_t rows = 0;
  bool running = false;

  // Wraps `inputs` without copying and converts them as the optimised model expects.
  StatusOr<std::vector<c10::IValue>> Wrap(const std::vector<RawTensor>& inputs) const;
  // Copies the outputs in `result` into [out, out + capacity) (see Run()).
  Status WriteOutputs(const c10::IValue& result, uint8_t* out, size_t capacity,
                      std::vector<RawTensor>* outputs) const;

  std::function<Status(uint8_t* out, size_t bytes)> output_backing;  // may be empty
};

StatusOr<std::vector<c10::IValue>> ModelRunner::Impl::Wrap(
    const std::vector<RawTensor>& inputs) const {
  std::vector<c10::IValue> args;
  args.reserve(inputs.size());
  for (const RawTensor& in : inputs) {
    const auto type = ToScalarType(in.datatype);
    if (!type) return InvalidArgument("unsupported input datatype");
    args.emplace_back(torch::from_blob(in.data, in.shape, torch::TensorOptions().dtype(*type)));
  }
  PrepareInputs(active, &args);
  return args;
}

Status ModelRunner::Impl::WriteOutputs(const c10::IValue& result, uint8_t* out, size_t capacity,
                                       std::vector<RawTensor>* outputs) const {
  std::vector<at::Tensor> tensors;
  RETURN_IF_ERROR(CollectOutputs(result, &tensors));
  // Lay out first: the bytes the outputs need are backed (output_backing) before any is written.
  std::vector<size_t> offsets;
  size_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = tensors[i];
    const DataType want =
        i < options.output_types.size() ? options.output_types[i] : DataType::kInvalid;
    if (want != DataType::kInvalid && FromScalarType(t.scalar_type()) != want) {
      t = t.to(*ToScalarType(want));
    }
    t = t.contiguous();
    if (FromScalarType(t.scalar_type()) == DataType::kInvalid) {
      return InvalidArgument("output " + std::to_string(i) + " has an unsupported dtype");
    }
    offset = shm::AlignUp(offset);
    offsets.push_back(offset);
    offset += t.numel() * t.element_size();
    if (offset > capacity) {
      return ResourceExhausted("outputs need more than the " + std::to_string(capacity) +
                               "-byte output slab");
    }
  }
  if (output_backing) RETURN_IF_ERROR(output_backing(out, offset));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    const size_t bytes = t.numel() * t.element_size();
    if (bytes > 0) std::memcpy(out + offsets[i], t.data_ptr(), bytes);  // empty: maybe no storage
    RawTensor raw;
    raw.datatype = FromScalarType(t.scalar_type());
    raw.shape.assign(t.sizes().begin(), t.sizes().end());
    raw.data = out + offsets[i];
    raw.byte_size = bytes;
    outputs->push_back(std::move(raw));
  }
  return Status::Ok();
}

void ModelRunner::set_output_backing(std::function<Status(uint8_t* out, size_t bytes)> back) {
  impl_->output_backing = std::move(back);
}

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
    impl->model.whole = torch::jit::load(options.model_path, torch::kCPU);
    impl->model.whole.eval();
    impl->model.stages = StagesOf(impl->model.whole);
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
    Executable optimized = Optimize(impl->model.whole, opt);
    LoadReport& report = impl->report;
    report.kernel = opt.Key();
    bool within = true;
    if (options.guard.samples > 0 && !options.inputs.empty()) {
      RETURN_IF_ERROR(Compare(impl->model, optimized, opt, options, &report));
      within =
          report.max_rel_error <= options.guard.max_rel_error &&
          (report.top1_agreement < 0 || report.top1_agreement >= options.guard.min_top1_agreement);
    }
    PACKRAT_LOG(INFO) << "optimised " << options.model_path << ": " << report.ToString();
    if (within) {
      impl->model = std::move(optimized);
      impl->active = opt;
    } else if (options.guard.strict) {
      return FailedPrecondition("the " + opt.Key() + " model is beyond the accuracy tolerance " +
                                "(max_rel_error " + std::to_string(report.max_rel_error) + " > " +
                                std::to_string(options.guard.max_rel_error) +
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
  if (!impl_->model.stages.empty()) {  // staged: the same stages the layered path runs
    RETURN_IF_ERROR(Begin(inputs));
    while (impl_->done < num_stages()) RETURN_IF_ERROR(RunStage());
    return Finish(out, out_capacity, outputs);
  }
  try {
    c10::InferenceMode guard;
    ASSIGN_OR_RETURN(std::vector<c10::IValue> args, impl_->Wrap(inputs));
    return impl_->WriteOutputs(impl_->model.whole.forward(std::move(args)), out, out_capacity,
                               outputs);
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("model failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {  // e.g. torch::jit::JITException from the interpreter
    return InvalidArgument(std::string("model failed: ") + e.what());
  }
}

int ModelRunner::num_stages() const { return static_cast<int>(impl_->model.stages.size()); }
int ModelRunner::stages_done() const { return impl_->done; }
int64_t ModelRunner::running_rows() const { return impl_->rows; }

Status ModelRunner::Begin(const std::vector<RawTensor>& inputs) {
  if (impl_->model.stages.empty()) return FailedPrecondition("the model is not staged");
  if (inputs.size() != 1) {
    return InvalidArgument("a staged model takes one input tensor, got " +
                           std::to_string(inputs.size()));
  }
  try {
    c10::InferenceMode guard;
    ASSIGN_OR_RETURN(std::vector<c10::IValue> args, impl_->Wrap(inputs));
    impl_->current = std::move(args[0]);
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("model failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("model failed: ") + e.what());
  }
  impl_->done = 0;
  impl_->rows = inputs[0].shape.empty() ? 0 : inputs[0].shape[0];
  impl_->running = true;
  return Status::Ok();
}

Status ModelRunner::RunStage() {
  if (!impl_->running || impl_->done >= num_stages()) {
    return FailedPrecondition("no stage left to run");
  }
  try {
    c10::InferenceMode guard;
    c10::IValue next = impl_->model.stages[impl_->done].forward({impl_->current});
    if (impl_->done + 1 < num_stages() && !next.isTensor()) {
      impl_->running = false;
      return InvalidArgument("stage " + std::to_string(impl_->done) + " returned " +
                             next.tagKind() + "; inner stages must return one Tensor");
    }
    impl_->current = std::move(next);
  } catch (const c10::Error& e) {
    impl_->running = false;
    return InvalidArgument(std::string("model failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    impl_->running = false;
    return InvalidArgument(std::string("model failed: ") + e.what());
  }
  ++impl_->done;
  return Status::Ok();
}

Status ModelRunner::Join(const std::vector<RawTensor>& inputs) {
  if (!impl_->running || impl_->done == 0 || impl_->done >= num_stages()) {
    return FailedPrecondition("rows join a batch between two stages");
  }
  if (inputs.size() != 1) return InvalidArgument("a staged model takes one input tensor");
  try {
    c10::InferenceMode guard;
    ASSIGN_OR_RETURN(std::vector<c10::IValue> args, impl_->Wrap(inputs));
    at::Tensor x = args[0].toTensor();
    for (int k = 0; k < impl_->done; ++k) x = impl_->model.stages[k].forward({x}).toTensor();
    const at::Tensor running = impl_->current.toTensor();
    impl_->current = at::cat({running, x}, 0);
  } catch (const c10::Error& e) {
    impl_->running = false;
    return InvalidArgument(std::string("joining rows failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    impl_->running = false;
    return InvalidArgument(std::string("joining rows failed: ") + e.what());
  }
  impl_->rows += inputs[0].shape.empty() ? 0 : inputs[0].shape[0];
  return Status::Ok();
}

Status ModelRunner::Finish(uint8_t* out, size_t out_capacity, std::vector<RawTensor>* outputs) {
  outputs->clear();
  if (!impl_->running || impl_->done != num_stages()) {
    impl_->running = false;
    return FailedPrecondition("the batch has stages left to run");
  }
  impl_->running = false;
  c10::IValue result = std::move(impl_->current);
  impl_->current = c10::IValue();
  try {
    return impl_->WriteOutputs(result, out, out_capacity, outputs);
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("model failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {  // e.g. std::bad_alloc making an output contiguous
    return Internal(std::string("writing the outputs failed: ") + e.what());
  }
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
      for (int i = 0; i < iterations; ++i) Forward(impl_->model, args);
    }
  } catch (const c10::Error& e) {
    return InvalidArgument(std::string("warm-up failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Internal(std::string("warm-up failed: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace packrat::runtime
