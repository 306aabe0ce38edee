// The REST answer of the statistics extension (Triton's v2 protocol):
//   GET /v2/models[/{m}[/versions/{v}]]/stats ->
//   {"model_stats": [{"name", "version", "last_inference", "inference_count",
//     "execution_count", "inference_stats": {"success": {"count", "ns"}, "fail", "queue",
//     "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"},
//     "batch_stats": [{"batch_size", "compute_input", "compute_infer", "compute_output"}],
//     "memory_usage": []}]}
// The figures are agent/metrics/inference_statistics.h's; there is no response cache, so
// cache_hit and cache_miss stay 0.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "agent/metrics/inference_statistics.h"

namespace packrat {

struct NamedStatistics {
  std::string name;
  std::string version;
  metrics::InferenceStatistics::Snapshot figures;
};

std::string ModelStatisticsJson(const std::vector<NamedStatistics>& models);

}  // namespace packrat
