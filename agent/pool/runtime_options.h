// The options every runtime of a model shares, whoever starts it — the serving sets
// (agent/model), the profiler and the stage profiler (agent/profiling): the one place that turns
// a ModelConfig into runtime options. Callers then set what is theirs (threads, cores, batch,
// slots, callbacks).
#pragma once

#include <string>

#include "agent/config/config.h"
#include "agent/pool/decode_instance.h"
#include "agent/pool/runtime_instance.h"

namespace packrat {

// A batch runtime of `model` (not generative): its model file, signature, slab room for
// varying rows, warm-up, kernel settings and accuracy guard, start-up and hang timeouts.
RuntimeInstanceOptions BatchRuntimeOptions(const ModelConfig& model,
                                           const std::string& runtime_path);

// A decode runtime of a generative `model`: its model file, refill policy, prompt limit,
// start-up and hang timeouts.
DecodeInstanceOptions DecodeRuntimeOptions(const ModelConfig& model,
                                           const std::string& runtime_path);

// For a measurement (profiling): no accuracy guard (it runs when serving), one warm-up pass,
// one slot, and no hang watchdog (a large profiled batch may run for minutes).
void ForMeasurement(RuntimeInstanceOptions* options);

}  // namespace packrat
