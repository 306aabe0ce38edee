// A model's configuration as Triton's ModelConfig shows it (model_config.proto), for the
// clients that read it: REST `GET /v2/models/{m}[/versions/{v}]/config` on the inference
// address and gRPC ModelConfig. Only the fields that describe a Packrat model are filled; the
// others keep Triton's defaults. Packrat's own view of a model's config, with its plan and
// estimator, stays on the management address (docs/operations.md, "Management API").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/config/config.h"

namespace packrat {

struct TritonModelConfig {
  struct Tensor {
    std::string name;
    std::string data_type;      // Triton's DataType name: "TYPE_FP32", "TYPE_INT64", ...
    std::vector<int64_t> dims;  // without the batch dim where max_batch_size > 0
  };
  // One ModelInstanceGroup per ⟨threads, batch⟩ group of the serving plan, kind KIND_CPU.
  struct InstanceGroup {
    std::string name;  // "<model>_t<threads>_b<batch>"
    int count = 0;
  };

  std::string name;
  std::string platform;  // the model metadata's platform
  std::string backend = "pytorch";
  int32_t max_batch_size = 0;  // batching.max_batch; 0: no limit, dims are whole shapes
  std::vector<Tensor> input;
  std::vector<Tensor> output;
  std::vector<InstanceGroup> instance_group;
  std::string default_model_filename;  // the model file's name
  // dynamic_batching: the serving plan's B, and batching.max_delay_us.
  std::vector<int32_t> preferred_batch_size;
  uint64_t max_queue_delay_microseconds = 0;
  // Packrat's own settings, as Triton's backends put theirs: "packrat.instances" ("auto" or
  // "static"), "packrat.max_inflight_batches", "packrat.p99_target_ms" (where set).
  std::vector<std::pair<std::string, std::string>> parameters;
};

// The Triton view of `config`, whose request signature is `signature` (ServedModel::signature:
// a generative model's token ids) and which serves `serving` (empty before it loads).
TritonModelConfig TritonConfigOf(const ModelConfig& config, const ModelSignature& signature,
                                 const std::vector<InstanceGroup>& serving);

// The JSON that Triton's REST config endpoint answers (protobuf's JSON with the proto's field
// names and enum names, 64-bit integers as numbers): {"name": ..., "max_batch_size": ...,
// "input": [{"name": ..., "data_type": "TYPE_FP32", "dims": [...]}], ...}.
std::string TritonModelConfigJson(const TritonModelConfig& config);

}  // namespace packrat
