#include "agent/pool/runtime_options.h"

#include "agent/pool/virtual_node.h"

namespace packrat {

RuntimeInstanceOptions BatchRuntimeOptions(const ModelConfig& model,
                                           const std::string& runtime_path) {
  RuntimeInstanceOptions o;
  o.model_name = model.name;
  o.runtime_path = runtime_path;
  o.model_path = model.path;
  o.inputs = model.inputs;
  o.outputs = model.outputs;
  o.variable_slab_bytes = static_cast<uint64_t>(model.batching.variable_tensor_bytes);
  o.warmup_iterations = model.warmup_iterations;
  o.kernel = model.kernel;
  o.accuracy = model.accuracy;
  o.startup_timeout = std::chrono::seconds(model.startup_timeout_s);
  o.slice_timeout = std::chrono::seconds(model.slice_timeout_s);
  o.emulate = model.emulate;
  if (model.emulate.enabled) o.runtime_path = EmulatedRuntimePath(runtime_path);
  return o;
}

DecodeInstanceOptions DecodeRuntimeOptions(const ModelConfig& model,
                                           const std::string& runtime_path) {
  DecodeInstanceOptions o;
  o.model_name = model.name;
  o.runtime_path = runtime_path;
  o.model_path = model.path;
  o.refill = model.generation.refill;
  o.max_prompt_tokens = model.generation.max_prompt_tokens;
  o.startup_timeout = std::chrono::seconds(model.startup_timeout_s);
  o.slice_timeout = std::chrono::seconds(model.slice_timeout_s);
  return o;
}

void ForMeasurement(RuntimeInstanceOptions* options) {
  options->warmup_iterations = 1;
  options->accuracy.samples = 0;
  options->slots = 1;
  options->slice_timeout = std::chrono::milliseconds(0);
}

}  // namespace packrat
