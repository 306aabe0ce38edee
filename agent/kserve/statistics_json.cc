#include "agent/kserve/statistics_json.h"

#include <initializer_list>
#include <utility>

#include "common/json_string.h"

namespace packrat {
namespace {

using Duration = metrics::InferenceStatistics::Duration;

// "name":{"count":C,"ns":N}, comma-separated.
void AppendDurations(std::string& out,
                     std::initializer_list<std::pair<const char*, Duration>> durations) {
  bool first = true;
  for (const auto& [name, d] : durations) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += name;
    out += "\":{\"count\":" + std::to_string(d.count) + ",\"ns\":" + std::to_string(d.ns) + "}";
  }
}

}  // namespace

std::string ModelStatisticsJson(const std::vector<NamedStatistics>& models) {
  std::string out = "{\"model_stats\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    const NamedStatistics& m = models[i];
    const metrics::InferenceStatistics::Snapshot& f = m.figures;
    if (i > 0) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, m.name);
    out += ",\"version\":";
    AppendJsonString(out, m.version);
    out += ",\"last_inference\":" + std::to_string(f.last_inference_ms) +
           ",\"inference_count\":" + std::to_string(f.inference_count) +
           ",\"execution_count\":" + std::to_string(f.execution_count) + ",\"inference_stats\":{";
    AppendDurations(out, {{"success", f.success},
                          {"fail", f.fail},
                          {"queue", f.queue},
                          {"compute_input", f.compute_input},
                          {"compute_infer", f.compute_infer},
                          {"compute_output", f.compute_output},
                          {"cache_hit", Duration{}},
                          {"cache_miss", Duration{}}});
    out += "},\"batch_stats\":[";
    for (size_t k = 0; k < f.batches.size(); ++k) {
      const auto& b = f.batches[k];
      if (k > 0) out += ',';
      out += "{\"batch_size\":" + std::to_string(b.batch_size) + ',';
      AppendDurations(out, {{"compute_input", b.compute_input},
                            {"compute_infer", b.compute_infer},
                            {"compute_output", b.compute_output}});
      out += '}';
    }
    out += "],\"memory_usage\":[]}";
  }
  out += "]}";
  return out;
}

}  // namespace packrat
