// The `models[]` entries of the agent's config (config.h), one function per section.
#include <algorithm>
#include <filesystem>
#include <set>

#include "agent/config/config.h"
#include "agent/config/config_reader.h"
#include "agent/planning/profile.h"

namespace packrat::config_internal {
namespace {

Status ParseTensors(const Reader& r, const YAML::Node& node, const std::string& key,
                    std::vector<TensorSpec>* out) {
  if (!node.IsSequence() || node.size() == 0) {
    return r.Error(node, key, "must be a non-empty list of tensors");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node t = node[i];
    const std::string k = key + "[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(r.CheckKeys(t, k, kTensorKeys));
    TensorSpec spec;
    if (!t["name"]) return r.Error(t, k + ".name", "is required");
    RETURN_IF_ERROR(r.GetString(t["name"], k + ".name", &spec.name));
    if (spec.name.empty() || !names.insert(spec.name).second) {
      return r.Error(t["name"], k + ".name", "must be non-empty and unique");
    }
    if (!t["datatype"]) return r.Error(t, k + ".datatype", "is required");
    std::string type;
    RETURN_IF_ERROR(r.GetString(t["datatype"], k + ".datatype", &type));
    const auto dt = DataTypeFromName(type);
    if (!dt) return r.Error(t["datatype"], k + ".datatype", "unknown datatype '" + type + "'");
    spec.datatype = *dt;
    const YAML::Node shape = t["shape"];
    if (!shape || !shape.IsSequence() || shape.size() == 0) {
      return r.Error(shape ? shape : t, k + ".shape", "must be a non-empty list of dims");
    }
    if (shape.size() > 8) return r.Error(shape, k + ".shape", "has more than 8 dims");
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t dim = 0;
      RETURN_IF_ERROR(
          r.GetInt(shape[d], k + ".shape[" + std::to_string(d) + "]", -1, int64_t{1} << 31, &dim));
      if (dim == 0) return r.Error(shape[d], k + ".shape", "dims must be -1 or >= 1");
      spec.shape.push_back(dim);
    }
    if (spec.shape[0] != -1) {
      return r.Error(shape, k + ".shape", "the first dim is the batch dim and must be -1");
    }
    out->push_back(std::move(spec));
  }
  return Status::Ok();
}

// `generation:` (`g`; `model` is the whole entry, whose other keys it checks).
Status ParseGeneration(const Reader& r, const YAML::Node& model, const YAML::Node& g,
                       const std::string& key, ModelConfig* m) {
  const std::string k = key + ".generation";
  GenerationConfig& gen = m->generation;
  gen.enabled = true;
  if (!g.IsNull()) {
    RETURN_IF_ERROR(r.CheckKeys(g, k, kGenerationKeys));
    if (g["refill"]) {
      RETURN_IF_ERROR(r.GetString(g["refill"], k + ".refill", &gen.refill));
      if (gen.refill != "half" && gen.refill != "step" && gen.refill != "static") {
        return r.Error(g["refill"], k + ".refill", "must be half, step or static");
      }
    }
    if (g["max_tokens"]) {
      RETURN_IF_ERROR(r.GetInt(g["max_tokens"], k + ".max_tokens", 1, 1 << 20, &gen.max_tokens));
    }
    if (g["default_max_tokens"]) {
      RETURN_IF_ERROR(r.GetInt(g["default_max_tokens"], k + ".default_max_tokens", 1, 1 << 20,
                               &gen.default_max_tokens));
    }
    if (g["max_prompt_tokens"]) {
      RETURN_IF_ERROR(r.GetInt(g["max_prompt_tokens"], k + ".max_prompt_tokens", 1, 1 << 20,
                               &gen.max_prompt_tokens));
    }
  }
  gen.default_max_tokens = std::min(gen.default_max_tokens, gen.max_tokens);
  for (const char* other : {"inputs", "outputs", "optimize"}) {
    if (model[other]) {
      return r.Error(model[other], key + "." + other,
                     "does not apply to a generative model (token ids in and out)");
    }
  }
  return Status::Ok();
}

// `batching:`.
Status ParseBatching(const Reader& r, const YAML::Node& b, const std::string& key, ModelConfig* m) {
  const std::string k = key + ".batching";
  RETURN_IF_ERROR(r.CheckKeys(b, k, kBatchingKeys));
  if (b["mode"]) {
    std::string mode;
    RETURN_IF_ERROR(r.GetString(b["mode"], k + ".mode", &mode));
    if (mode == "layered") {
      m->batching.mode = BatchingMode::kLayered;
    } else if (mode != "batched") {
      return r.Error(b["mode"], k + ".mode", "must be 'batched' or 'layered'");
    }
  }
  if (b["latency_budget_ms"]) {
    RETURN_IF_ERROR(r.GetDouble(b["latency_budget_ms"], k + ".latency_budget_ms", 0.001, 3'600'000,
                                &m->batching.latency_budget_ms));
  }
  if (b["profile_repeats"]) {
    RETURN_IF_ERROR(r.GetIntAs(b["profile_repeats"], k + ".profile_repeats", 1, 1000,
                               &m->batching.profile_repeats));
  }
  if (m->batching.mode == BatchingMode::kLayered) {
    if (m->generation.enabled) {
      return r.Error(b["mode"], k + ".mode",
                     "layered batching is for staged models, not generative ones");
    }
    if (m->batching.latency_budget_ms <= 0) {
      return r.Error(b, k + ".latency_budget_ms", "is required with mode: layered");
    }
    if (m->inputs.size() != 1) {
      return r.Error(b["mode"], k + ".mode", "layered batching needs a model with one input");
    }
  } else if (b["latency_budget_ms"] || b["profile_repeats"]) {
    return r.Error(b, k, "latency_budget_ms and profile_repeats need mode: layered");
  }
  if (b["timeout_ms"]) {
    RETURN_IF_ERROR(
        r.GetInt(b["timeout_ms"], k + ".timeout_ms", 0, 86'400'000, &m->batching.timeout_ms));
  }
  if (b["max_batch"]) {
    RETURN_IF_ERROR(r.GetInt(b["max_batch"], k + ".max_batch", 0, 1 << 20, &m->batching.max_batch));
  }
  if (b["max_delay_us"]) {
    RETURN_IF_ERROR(
        r.GetInt(b["max_delay_us"], k + ".max_delay_us", 0, 60'000'000, &m->batching.max_delay_us));
  }
  if (b["max_batch_latency_ms"]) {
    RETURN_IF_ERROR(r.GetDouble(b["max_batch_latency_ms"], k + ".max_batch_latency_ms", 0,
                                3'600'000, &m->batching.max_batch_latency_ms));
  }
  if (b["p99_target_ms"]) {
    RETURN_IF_ERROR(r.GetDouble(b["p99_target_ms"], k + ".p99_target_ms", 0.001, 3'600'000,
                                &m->batching.p99_target_ms));
  }
  if (b["max_inflight_batches"]) {
    RETURN_IF_ERROR(r.GetIntAs(b["max_inflight_batches"], k + ".max_inflight_batches", 1, 64,
                               &m->batching.max_inflight_batches));
  }
  // A target bounds the batches too where no limit is given: a row may wait for the batches in
  // flight ahead of it, then run in its own (docs/configuration.md).
  if (!b["max_batch_latency_ms"] && m->batching.p99_target_ms > 0) {
    m->batching.max_batch_latency_ms = m->batching.p99_target_ms / m->batching.max_inflight_batches;
  }
  if (b["max_queue_rows"]) {
    RETURN_IF_ERROR(r.GetInt(b["max_queue_rows"], k + ".max_queue_rows", 1, 1 << 24,
                             &m->batching.max_queue_rows));
  }
  if (b["variable_tensor_bytes"]) {
    RETURN_IF_ERROR(r.GetInt(b["variable_tensor_bytes"], k + ".variable_tensor_bytes", 4096,
                             int64_t{1} << 34, &m->batching.variable_tensor_bytes));
  }
  return Status::Ok();
}

// `instances:` (an explicit plan or `auto`), which batching settles first.
Status ParseInstances(const Reader& r, const YAML::Node& node, const std::string& key,
                      ModelConfig* m) {
  const YAML::Node inst = node["instances"];
  if (!inst) return r.Error(node, key + ".instances", "is required");
  if (inst.IsScalar() && inst.as<std::string>() == "auto") {
    m->auto_instances = true;
    if (m->batching.mode == BatchingMode::kLayered) {
      return r.Error(inst, key + ".instances",
                     "layered batching needs an explicit plan ([{count, threads, batch}])");
    }
    if (m->batching.max_batch < 1) {
      return r.Error(inst, key + ".instances",
                     "'auto' needs batching.max_batch (the B the optimizer plans for)");
    }
  } else if (!inst.IsSequence() || inst.size() == 0) {
    return r.Error(inst, key + ".instances",
                   "must be 'auto' or a non-empty list of {count, threads, batch}");
  }
  for (size_t i = 0; !m->auto_instances && i < inst.size(); ++i) {
    const std::string k = key + ".instances[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(r.CheckKeys(inst[i], k, kInstanceKeys));
    InstanceGroup g;
    for (const char* field : {"count", "threads", "batch"}) {
      if (!inst[i][field]) return r.Error(inst[i], k + "." + field, "is required");
    }
    RETURN_IF_ERROR(r.GetIntAs(inst[i]["count"], k + ".count", 1, 1024, &g.count));
    RETURN_IF_ERROR(r.GetIntAs(inst[i]["threads"], k + ".threads", 1, 1024, &g.threads));
    RETURN_IF_ERROR(r.GetIntAs(inst[i]["batch"], k + ".batch", 1, 1 << 16, &g.batch));
    m->instances.push_back(g);
  }
  return Status::Ok();
}

// `optimize:` (a mapping, or `auto`).
Status ParseOptimize(const Reader& r, const YAML::Node& opt, const std::string& key,
                     ModelConfig* m) {
  const std::string k = key + ".optimize";
  OptimizeConfig& o = m->optimize;
  if (opt.IsScalar()) {  // `optimize: auto` = every optimisation the CPU and model allow
    std::string word;
    RETURN_IF_ERROR(r.GetString(opt, k, &word));
    if (word != "auto") return r.Error(opt, k, "must be 'auto' or a mapping");
    o.precision = "auto";
    o.memory_format = "auto";
    o.freeze = true;
  } else {
    RETURN_IF_ERROR(r.CheckKeys(opt, k, kOptimizeKeys));
    if (opt["precision"]) {
      RETURN_IF_ERROR(r.GetString(opt["precision"], k + ".precision", &o.precision));
      if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "auto") {
        return r.Error(opt["precision"], k + ".precision", "must be fp32, bf16 or auto");
      }
    }
    if (opt["memory_format"]) {
      RETURN_IF_ERROR(r.GetString(opt["memory_format"], k + ".memory_format", &o.memory_format));
      if (o.memory_format != "contiguous" && o.memory_format != "channels_last" &&
          o.memory_format != "auto") {
        return r.Error(opt["memory_format"], k + ".memory_format",
                       "must be contiguous, channels_last or auto");
      }
    }
    if (opt["freeze"]) RETURN_IF_ERROR(r.Get(opt["freeze"], k + ".freeze", &o.freeze));
    if (opt["allow_emulated_bf16"]) {
      RETURN_IF_ERROR(
          r.Get(opt["allow_emulated_bf16"], k + ".allow_emulated_bf16", &o.allow_emulated_bf16));
    }
  }
  return Status::Ok();
}

// `accuracy:`.
Status ParseAccuracy(const Reader& r, const YAML::Node& acc, const std::string& key,
                     ModelConfig* m) {
  const std::string k = key + ".accuracy";
  AccuracyConfig& a = m->accuracy;
  RETURN_IF_ERROR(r.CheckKeys(acc, k, kAccuracyKeys));
  if (acc["samples"])
    RETURN_IF_ERROR(r.GetIntAs(acc["samples"], k + ".samples", 0, 1024, &a.samples));
  if (acc["max_rel_error"]) {
    RETURN_IF_ERROR(
        r.GetDouble(acc["max_rel_error"], k + ".max_rel_error", 0, 1e9, &a.max_rel_error));
  }
  if (acc["min_top1_agreement"]) {
    RETURN_IF_ERROR(r.GetDouble(acc["min_top1_agreement"], k + ".min_top1_agreement", 0, 1,
                                &a.min_top1_agreement));
  }
  if (acc["strict"]) RETURN_IF_ERROR(r.Get(acc["strict"], k + ".strict", &a.strict));
  return Status::Ok();
}

// `reconfiguration:`.
Status ParseReconfiguration(const Reader& r, const YAML::Node& rc, const std::string& key,
                            ModelConfig* m) {
  const std::string k = key + ".reconfiguration";
  ReconfigurationConfig& c = m->reconfiguration;
  for (const auto& [retired, why] : kRetiredReconfigurationKeys) {
    if (rc[retired]) {
      return InvalidArgument(k + "." + retired + ": no longer a setting (" + std::string(why) +
                             "; docs/configuration.md, \"Policy keys and constants\")");
    }
  }
  RETURN_IF_ERROR(r.CheckKeys(rc, k, kReconfigurationKeys));
  if (const YAML::Node parked = rc["parked_runtimes"]) {
    if (parked.IsScalar() && parked.as<std::string>() == "auto") {
      c.parked_runtimes = ReconfigurationConfig::kParkAuto;
    } else {
      RETURN_IF_ERROR(r.GetInt(parked, k + ".parked_runtimes", 0, 4096, &c.parked_runtimes));
    }
  }
  if (rc["slowdown_floor"]) {
    RETURN_IF_ERROR(
        r.GetDouble(rc["slowdown_floor"], k + ".slowdown_floor", 0.25, 1, &c.slowdown_floor));
  }
  if (rc["min_capacity"]) {
    RETURN_IF_ERROR(r.GetDouble(rc["min_capacity"], k + ".min_capacity", 0, 1e9, &c.min_capacity));
  }
  if (rc["idle_start_s"]) {
    RETURN_IF_ERROR(r.GetDouble(rc["idle_start_s"], k + ".idle_start_s", 0, 3600, &c.idle_start_s));
  }
  if (rc["skip_warmup_on_busy_cpus"]) {
    RETURN_IF_ERROR(r.Get(rc["skip_warmup_on_busy_cpus"], k + ".skip_warmup_on_busy_cpus",
                          &c.skip_warmup_on_busy_cpus));
  }
  if (rc["max_utilization"]) {
    RETURN_IF_ERROR(
        r.GetDouble(rc["max_utilization"], k + ".max_utilization", 0.01, 1, &c.max_utilization));
  }
  if (rc["overload_window_ms"]) {
    RETURN_IF_ERROR(r.GetInt(rc["overload_window_ms"], k + ".overload_window_ms", 0, 3'600'000,
                             &c.overload_window_ms));
  }
  if (rc["scale_down_delay_ms"]) {
    RETURN_IF_ERROR(r.GetInt(rc["scale_down_delay_ms"], k + ".scale_down_delay_ms", 0, 86'400'000,
                             &c.scale_down_delay_ms));
  }
  if (rc["adaptive"]) RETURN_IF_ERROR(r.Get(rc["adaptive"], k + ".adaptive", &c.adaptive));
  if (rc["sample_period_ms"]) {
    RETURN_IF_ERROR(r.GetInt(rc["sample_period_ms"], k + ".sample_period_ms", 1, 3'600'000,
                             &c.sample_period_ms));
  }
  if (rc["drain_timeout_s"]) {
    RETURN_IF_ERROR(
        r.GetInt(rc["drain_timeout_s"], k + ".drain_timeout_s", 1, 86400, &c.drain_timeout_s));
  }
  return Status::Ok();
}

// `emulate:` (emulated runtimes; `model` is the whole entry, whose other keys it checks).
Status ParseEmulate(const Reader& r, const YAML::Node& model, const YAML::Node& e,
                    const std::string& key, const std::string& base_dir, ModelConfig* m) {
  const std::string k = key + ".emulate";
  EmulateConfig& em = m->emulate;
  em.enabled = true;
  RETURN_IF_ERROR(r.CheckKeys(e, k, kEmulateKeys));
  if (!e["profile"]) return r.Error(e, k + ".profile", "is required");
  // A profile path, made absolute and checked to load.
  auto read_profile = [&](const char* name, std::string* path) -> Status {
    RETURN_IF_ERROR(r.GetString(e[name], k + "." + name, path));
    std::filesystem::path p(*path);
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    *path = p.lexically_normal().string();
    if (StatusOr<Profile> profile = Profile::LoadCsv(*path); !profile.ok()) {
      return r.Error(e[name], k + "." + name, profile.status().message());
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(read_profile("profile", &em.profile));
  if (e["truth"]) RETURN_IF_ERROR(read_profile("truth", &em.truth));
  if (e["profile_error"]) {
    RETURN_IF_ERROR(
        r.GetDouble(e["profile_error"], k + ".profile_error", 0, 0.9, &em.profile_error));
  }
  if (e["jitter_cv"]) {
    RETURN_IF_ERROR(r.GetDouble(e["jitter_cv"], k + ".jitter_cv", 0, 3, &em.jitter_cv));
  }
  if (e["seed"]) {
    RETURN_IF_ERROR(r.GetInt(e["seed"], k + ".seed", 0, INT64_MAX, &em.seed));
  }
  if (e["load_s"]) RETURN_IF_ERROR(r.GetDouble(e["load_s"], k + ".load_s", 0, 3600, &em.load_s));
  if (e["neighbour_slowdown"]) {
    RETURN_IF_ERROR(r.GetDouble(e["neighbour_slowdown"], k + ".neighbour_slowdown", 0, 10,
                                &em.neighbour_slowdown));
  }
  if (m->generation.enabled) {
    return r.Error(e, k, "emulated runtimes serve batch models, not generative ones");
  }
  if (m->batching.mode == BatchingMode::kLayered) {
    return r.Error(model["batching"], k,
                   "emulated runtimes do not run staged models' layered top-ups; use "
                   "batching.mode: batched");
  }
  return Status::Ok();
}

// `profile:` a profile measured elsewhere, for `instances: auto` (called after `instances`,
// `generation` and `emulate` are parsed).
Status ParseProfile(const Reader& r, const YAML::Node& node, const std::string& key,
                    const std::string& base_dir, ModelConfig* m) {
  const std::string k = key + ".profile";
  RETURN_IF_ERROR(r.GetString(node, k, &m->profile));
  std::filesystem::path p(m->profile);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  m->profile = p.lexically_normal().string();
  if (!m->auto_instances) {
    return r.Error(node, k, "is the profile `instances: auto` plans on; a static plan has none");
  }
  if (m->emulate.enabled) {
    return r.Error(node, k, "an emulated model's profile is emulate.profile");
  }
  if (m->generation.enabled) {
    return r.Error(node, k, "generative models are profiled in decode steps by the agent");
  }
  StatusOr<Profile> profile = Profile::LoadCsv(m->profile);
  if (!profile.ok()) return r.Error(node, k, profile.status().message());
  return Status::Ok();
}

}  // namespace

Status ParseModel(const Reader& r, const YAML::Node& node, const std::string& key,
                  const std::string& base_dir, ModelConfig* m) {
  RETURN_IF_ERROR(r.CheckKeys(node, key, kModelKeys));
  if (!node["name"]) return r.Error(node, key + ".name", "is required");
  RETURN_IF_ERROR(r.GetString(node["name"], key + ".name", &m->name));
  for (char c : m->name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return r.Error(node["name"], key + ".name", "may hold only letters, digits, '_', '-', '.'");
    }
  }
  if (m->name.empty()) return r.Error(node["name"], key + ".name", "must not be empty");
  if (!node["path"] && !node["emulate"]) return r.Error(node, key + ".path", "is required");
  if (node["path"]) {
    RETURN_IF_ERROR(r.GetString(node["path"], key + ".path", &m->path));
    std::filesystem::path p(m->path);
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    m->path = p.lexically_normal().string();
  }
  if (const YAML::Node g = node["generation"]) {
    RETURN_IF_ERROR(ParseGeneration(r, node, g, key, m));
  } else {
    if (!node["inputs"]) return r.Error(node, key + ".inputs", "is required");
    RETURN_IF_ERROR(ParseTensors(r, node["inputs"], key + ".inputs", &m->inputs));
    if (!node["outputs"]) return r.Error(node, key + ".outputs", "is required");
    RETURN_IF_ERROR(ParseTensors(r, node["outputs"], key + ".outputs", &m->outputs));
  }
  if (m->inputs.size() > 8 || m->outputs.size() > 8) {
    return r.Error(node, key, "at most 8 inputs and 8 outputs are supported");
  }
  if (const YAML::Node b = node["batching"]) RETURN_IF_ERROR(ParseBatching(r, b, key, m));
  RETURN_IF_ERROR(ParseInstances(r, node, key, m));
  if (node["warmup_iterations"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["warmup_iterations"], key + ".warmup_iterations", 0, 1000,
                               &m->warmup_iterations));
  }
  if (node["auto_threads"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["auto_threads"], key + ".auto_threads", 1, 4096, &m->auto_threads));
  }
  if (node["min_threads"]) {
    RETURN_IF_ERROR(
        r.GetIntAs(node["min_threads"], key + ".min_threads", 1, 4096, &m->min_threads));
  }
  if (node["weight"]) {
    RETURN_IF_ERROR(r.GetDouble(node["weight"], key + ".weight", 0.001, 1000, &m->weight));
  }
  if (node["startup_timeout_s"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["startup_timeout_s"], key + ".startup_timeout_s", 1, 86400,
                               &m->startup_timeout_s));
  }
  if (node["slice_timeout_s"]) {
    RETURN_IF_ERROR(r.GetIntAs(node["slice_timeout_s"], key + ".slice_timeout_s", 0, 86400,
                               &m->slice_timeout_s));
  }
  if (const YAML::Node opt = node["optimize"]) RETURN_IF_ERROR(ParseOptimize(r, opt, key, m));
  if (const YAML::Node acc = node["accuracy"]) RETURN_IF_ERROR(ParseAccuracy(r, acc, key, m));
  if (const YAML::Node rc = node["reconfiguration"]) {
    RETURN_IF_ERROR(ParseReconfiguration(r, rc, key, m));
  }
  if (const YAML::Node e = node["emulate"]) {
    RETURN_IF_ERROR(ParseEmulate(r, node, e, key, base_dir, m));
  }
  if (const YAML::Node p = node["profile"]) RETURN_IF_ERROR(ParseProfile(r, p, key, base_dir, m));
  return Status::Ok();
}

}  // namespace packrat::config_internal
