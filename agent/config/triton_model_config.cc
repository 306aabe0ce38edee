#include "agent/config/triton_model_config.h"

#include <algorithm>
#include <climits>
#include <filesystem>

#include "common/datatype.h"
#include "common/json_string.h"

namespace packrat {
namespace {

// Triton's DataType names are the v2 protocol's with TYPE_ in front (BYTES, which Packrat does
// not serve, would be TYPE_STRING).
std::string TritonType(DataType type) { return "TYPE_" + std::string(DataTypeName(type)); }

std::vector<TritonModelConfig::Tensor> Tensors(const std::vector<TensorSpec>& specs, bool batched) {
  std::vector<TritonModelConfig::Tensor> out;
  for (const TensorSpec& s : specs) {
    TritonModelConfig::Tensor t{s.name, TritonType(s.datatype), s.shape};
    if (batched && !t.dims.empty()) t.dims.erase(t.dims.begin());  // the batch dim
    out.push_back(std::move(t));
  }
  return out;
}

void AppendTensors(std::string& out, const char* key,
                   const std::vector<TritonModelConfig::Tensor>& tensors) {
  out += ",\"";
  out += key;
  out += "\":[";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, tensors[i].name);
    out += ",\"data_type\":\"" + tensors[i].data_type +
           "\",\"dims\":" + ShapeToString(tensors[i].dims) + "}";
  }
  out += ']';
}

}  // namespace

TritonModelConfig TritonConfigOf(const ModelConfig& config, const ModelSignature& signature,
                                 const std::vector<InstanceGroup>& serving) {
  TritonModelConfig c;
  c.name = config.name;
  c.platform = signature.platform;
  c.max_batch_size = static_cast<int32_t>(std::min<int64_t>(config.batching.max_batch, INT32_MAX));
  const bool batched = c.max_batch_size > 0;
  c.input = Tensors(signature.inputs, batched);
  c.output = Tensors(signature.outputs, batched);
  int64_t batch = 0;
  for (const InstanceGroup& g : serving) {
    c.instance_group.push_back(
        {config.name + "_t" + std::to_string(g.threads) + "_b" + std::to_string(g.batch), g.count});
    batch += static_cast<int64_t>(g.count) * g.batch;
  }
  if (!config.path.empty()) {
    c.default_model_filename = std::filesystem::path(config.path).filename().string();
  }
  if (batch > 0)
    c.preferred_batch_size.push_back(static_cast<int32_t>(std::min<int64_t>(batch, INT32_MAX)));
  c.max_queue_delay_microseconds = static_cast<uint64_t>(config.batching.max_delay_us);
  c.parameters.emplace_back("packrat.instances", config.auto_instances ? "auto" : "static");
  c.parameters.emplace_back("packrat.max_inflight_batches",
                            std::to_string(config.batching.max_inflight_batches));
  if (config.batching.p99_target_ms > 0) {
    std::string ms = std::to_string(config.batching.p99_target_ms);
    ms.erase(ms.find_last_not_of('0') + 1);
    if (ms.back() == '.') ms.pop_back();
    c.parameters.emplace_back("packrat.p99_target_ms", ms);
  }
  return c;
}

std::string TritonModelConfigJson(const TritonModelConfig& c) {
  std::string out = "{\"name\":";
  AppendJsonString(out, c.name);
  out += ",\"platform\":";
  AppendJsonString(out, c.platform);
  out += ",\"backend\":";
  AppendJsonString(out, c.backend);
  out += ",\"max_batch_size\":" + std::to_string(c.max_batch_size);
  AppendTensors(out, "input", c.input);
  AppendTensors(out, "output", c.output);
  out += ",\"instance_group\":[";
  for (size_t i = 0; i < c.instance_group.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, c.instance_group[i].name);
    out += ",\"kind\":\"KIND_CPU\",\"count\":" + std::to_string(c.instance_group[i].count) + "}";
  }
  out += "],\"default_model_filename\":";
  AppendJsonString(out, c.default_model_filename);
  out += ",\"dynamic_batching\":{\"preferred_batch_size\":" +
         ShapeToString({c.preferred_batch_size.begin(), c.preferred_batch_size.end()}) +
         ",\"max_queue_delay_microseconds\":" + std::to_string(c.max_queue_delay_microseconds);
  out += "},\"parameters\":{";
  for (size_t i = 0; i < c.parameters.size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(out, c.parameters[i].first);
    out += ":{\"string_value\":";
    AppendJsonString(out, c.parameters[i].second);
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace packrat
