// The agent's YAML configuration (see docs/configuration.md for every key).
//
//   server:
//     http: 127.0.0.1:8080          # port 0 = pick a free port (written to --port-file)
//     management: 127.0.0.1:8081
//     unix_socket: /run/packrat/agent.sock  # optional: the http routes on a Unix socket too
//   models:
//     - name: demo
//       path: models/resnet18.pt    # relative paths are relative to the config file's folder
//       inputs:  [{name: input__0, datatype: FP32, shape: [-1, 3, 224, 224]}]
//       outputs: [{name: output__0, datatype: FP32, shape: [-1, 1000]}]
//       batching: {max_batch: 32, max_delay_us: 2000}
//       instances: [{count: 2, threads: 1, batch: 4}]   # or: instances: auto
//
// Errors name the file, the line and the key ("demo.yaml:7: models[0].instances[0].threads:
// must be an integer >= 1"). Unknown keys are errors, so typos never pass silently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/config/kernel_settings.h"
#include "agent/kserve/shared_memory_registry.h"
#include "agent/kserve/tensor.h"
#include "agent/planning/instance_group.h"
#include "common/status.h"

namespace packrat {

struct Endpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
};

// The longest Unix domain socket path Linux accepts (sockaddr_un::sun_path less its NUL).
inline constexpr size_t kMaxUnixSocketPath = 107;

struct ServerConfig {
  Endpoint http{"127.0.0.1", 8080};
  Endpoint management{"127.0.0.1", 8081};
  Endpoint metrics{"127.0.0.1", 8082};    // GET /metrics (Prometheus text format)
  std::string unix_socket;                // also serve `http`'s routes on this Unix socket
  std::string grpc_unix_socket;           // also serve gRPC on this Unix socket
  bool log_json = false;                  // server.log_format: json (else text); logging.h
                                          // path (mode 0666); empty = off
  int io_threads = 2;                     // Asio threads serving HTTP
  uint64_t max_body_bytes = 64ull << 20;  // larger bodies are answered 413
  uint64_t max_header_bytes = 16ull << 10;
  int idle_timeout_s = 60;         // a connection silent this long is closed (also: a
                                   // request's headers must arrive within it)
  int read_timeout_s = 30;         // a request's body must arrive within this after its headers
  int64_t max_connections = 1024;  // connections beyond this get 503 and are closed
  std::string runtime_path;        // packrat-runtime; default: next to packrat-agent
  std::string profile_dir;         // profiles for `instances: auto`; default: the
                                   // "profiles" folder beside the config file
  int shutdown_timeout_s = 30;     // in-flight requests get this long on SIGTERM
  int drain_delay_s = 0;           // on SIGTERM, report not-ready and keep serving this
                                   // long first, so load balancers stop sending
  int runtime_idle_spin_us = 100;  // a runtime polls this long for its next batch, then sleeps
  bool cgroups = true;             // a cpuset cgroup per runtime where writable (else
                                   // sched_setaffinity only); false: affinity only
  // A file holding the bearer token every request to the management address must carry
  // (`Authorization: Bearer <token>`; a mounted Secret); empty: no token. Read at start.
  std::string management_token_file;
  // KServe v2 gRPC (agent/grpc), Triton's port; `grpc: off` clears grpc_enabled. Where the key
  // is given (grpc_explicit) failing to bind it is a start-up error; the default only warns.
  Endpoint grpc{"127.0.0.1", 8001};
  bool grpc_enabled = true;
  // The system shared-memory extension (agent/kserve/shared_memory_registry.h): `shared_memory:
  // off`, or `{key_prefix: P, dir: D}`: only objects whose names start with P, found in D.
  SharedMemoryOptions shared_memory;
  bool grpc_explicit = false;
  // The largest gRPC request message (larger: RESOURCE_EXHAUSTED from gRPC); when not given,
  // max_body_bytes (capped at INT32_MAX, gRPC's limit).
  uint64_t grpc_max_message_bytes = 64ull << 20;
  // gRPC calls in flight per client connection; further calls wait in the client.
  int grpc_max_concurrent_streams = 1024;
  // A folder of models, one sub-folder per model holding `model.yaml` (one `models[]` entry's
  // keys without `name`; the folder names the model; relative paths from that folder). Empty:
  // none (then `models` must not be empty).
  std::string model_repository;
  // Which repository models load at start: all of them (true, `model_control: all`), or none
  // until asked for (`explicit`, as Triton's --model-control-mode=explicit).
  bool load_all_models = true;
  // Server readiness once start-up has loaded what it was asked to: true, only while every
  // model is ready (Triton's strict readiness); false, whatever the models' states
  // (ModelRegistry::Ready).
  bool strict_readiness = true;
  // One line per answered request on `http` and `management` (agent/http/access_log.h):
  // "off", "json" or "logfmt"; to `access_log_path` ("-" or empty: stdout).
  // Share the CPUs among the `instances: auto` models by load and move them as the load moves
  // (agent/model/node_controller.h), once two or more such models serve; decisions every
  // partition_interval_ms.
  bool node_partition = true;
  int64_t partition_interval_ms = 1000;
  std::string access_log = "off";
  std::string access_log_path;
  // A virtual node (agent/pool/virtual_node.h): plan and place over CPUs 0..virtual_cpus-1,
  // sockets of virtual_cpus_per_socket (0: one socket), without cgroups or pinning; every
  // model must be emulated (`emulate:`). 0: the machine's own CPUs.
  int virtual_cpus = 0;
  int virtual_cpus_per_socket = 0;
};

enum class BatchingMode {
  kBatched,  // aggregate B rows (or wait max_delay), split them over the instances
  kLayered,  // start small batches at once; queued rows join them at stage boundaries while
             // the latency budget allows (lbci-paper; staged models only)
};

struct BatchingConfig {
  BatchingMode mode = BatchingMode::kBatched;
  double latency_budget_ms = 0;  // layered: t_opt, the budget a batch must finish within
  int profile_repeats = 5;       // layered: timed runs per batch size in the stage profile
  int64_t max_batch = 0;         // most rows one request may carry; 0 = no limit
  // `instances: auto`: the longest predicted batch latency (profile × measured slowdown) of a
  // plan the agent moves to by itself — estimator, overload path, backlog batches; 0 = no
  // limit. Where the arrival rate is known, a batch model's plan is judged on the mean
  // latency of the batches that rate cuts (simulated), not on full ones. A p99 objective of
  // X ms wants about X/2: a row may wait for one batch, then run in the next. An explicit
  // plan (management API) is not bound by it. Unset with p99_target_ms: p99_target_ms /
  // max_inflight_batches.
  double max_batch_latency_ms = 0;
  // The p99 latency (ms, arrival to answer) the node's joint partition of CPUs among models
  // aims to keep this model within (agent/planning/joint_partition.h); 0 = none.
  double p99_target_ms = 0;
  int64_t max_delay_us = 2000;    // a batch waits at most this long for more rows
  int max_inflight_batches = 2;   // batches dispatched but not finished, per model
  int64_t max_queue_rows = 4096;  // rows waiting per model; beyond it requests get 429
  // Each runtime's shared-memory room, per slot, for a tensor whose row size varies (a -1
  // beyond the batch dim): a slice carries at most this many bytes of it. Batches are cut into
  // slices that fit; a request of which one row does not fit gets 413. The room is sparse:
  // bytes never written take no memory.
  int64_t variable_tensor_bytes = int64_t{16} << 20;
  int64_t timeout_ms = 0;  // a request still queued this long after arrival is
                           // answered 504 and never run; 0 = none. A request's own
                           // `parameters.timeout` (µs) overrides it
};

// The batch-size estimator and automatic reconfiguration (packrat-paper §3.8). The estimator
// runs for every model (its value is a metric); only `instances: auto` models with `adaptive`
// act on it, since a new B needs the optimizer's profile.
struct ReconfigurationConfig {
  bool adaptive = true;  // reconfigure when the smoothed B changes
  // How often the load is sampled. The estimator's window is 50 samples and it decides every
  // 100 (BatchSizeEstimator::Options): 5 s and 10 s at the default.
  int64_t sample_period_ms = 100;
  int64_t drain_timeout_s = 60;  // an old instance set gets this long to finish its batches
  // The estimator's step down goes only as far as a plan that the arrivals of the last
  // scale_down_delay_ms would not have overloaded at this much of its capacity (StepDownBatch):
  // rows in the system shrink when a better plan serves them, and without this guard that
  // alone would trigger the step back down. Also the headroom the overload path plans for.
  // (0, 1]; at 1 only a plan that the arrivals would have overloaded fully busy is refused.
  double max_utilization = 0.8;
  // Overload: when the rows arriving over this span (or twice or four times it) exceed what
  // the serving set runs fully busy (in the batches it cuts from a backlog) by two Poisson
  // standard deviations while rows queue beyond its B, the model moves at once, without
  // waiting for the estimator's window, to the smallest B whose plan keeps up at
  // max_utilization (batch_for_rate.h). 0 disables it.
  int64_t overload_window_ms = 2000;
  // After the overload path moved B up, the estimator's steps down wait this long: scale up
  // fast, down slowly (as Kubernetes' autoscaler's stabilization window), since a rate near a
  // plan's capacity would otherwise move B down and up again, seconds of switching each time.
  int64_t scale_down_delay_ms = 30'000;
  // The fastest a served thread count is taken relative to its profile (SlowdownTracker): a
  // profile is timed beside fully busy neighbours, and below capacity they idle part of the
  // time (ResNet-50 on 2 cores: one-thread slices at 0.85-0.95 of the profile). Below this a
  // profile is stale, not a speed to plan on. [0.25, 1]; 1 never plans above the profile.
  double slowdown_floor = 0.8;
  // rows/s that the plans the estimator steps down to must run fully busy, at their own B (0:
  // none; batched models): capacity held in reserve for a burst that reaction cannot meet, as
  // a minimum replica count does for a Kubernetes autoscaler. A step of the load beyond what
  // the serving plan runs is found only after seconds of a growing queue (the overload path's
  // windows) and a switch; a plan that already runs it keeps up from the first second, at the
  // price of the lower load's latency (the plan for a larger B). The estimator's steps down
  // stop at the smallest B whose plan runs this much, and no plan for the same B replaces the
  // serving one with less; the overload path and the starting plan are as before.
  double min_capacity = 0;
  // A shadow runtime placed on CPUs that the serving set still uses starts cold: it loads its
  // model and skips the warm-up, whose parallel regions would share those CPUs with the
  // serving runtimes' threads and stall both (bench/results/peers-t16: a 10.9 s switch under
  // load against 1.0 s idle). Its first batches then run cold instead. With idle_start_s it
  // warms up while still at idle priority, where that costs the serving runtimes nothing.
  // false warms up anyway.
  bool skip_warmup_on_busy_cpus = true;
  // A shadow runtime placed on CPUs that the serving set still uses loads (and warms up, where
  // it does) at idle priority, SCHED_IDLE, for at most this many seconds: the kernel runs it
  // only while the serving runtimes leave those CPUs idle, so starting it no longer slows the
  // set that serves (common/idle_priority.h). Past the limit, counted from its launch, or once
  // it got under 2% of a CPU in a second while runnable (a serving set that leaves no idle
  // time: common/starvation_watch.h) it goes on at normal priority. A model that is behind
  // (rows queued beyond two batches of its serving set) starts its runtimes at normal
  // priority: it needs their capacity now. 0: normal priority from the
  // start. Coming back to normal priority needs CAP_SYS_NICE (deploy/daemonset.yaml grants it);
  // without it the runtime starts at normal priority.
  double idle_start_s = 3;
  // The most runtimes of earlier sets kept parked: started and warm but idle (an idle runtime
  // sleeps on its ring and uses no CPU; each holds one copy of the model in memory), so that a
  // move back to their shapes — the estimator's step up after a quiet spell — switches at once
  // instead of starting runtimes on the CPUs the serving set needs. The oldest go first. A
  // parked decoder finishes its sequences first. kParkAuto: the thread budget T (the most
  // instances a plan can have); 0 stops every runtime a set drops, as before.
  static constexpr int64_t kParkAuto = -1;
  int64_t parked_runtimes = kParkAuto;
};

// Generative models (amun-topup-batching-paper): POST /v2/models/{m}/generate[_stream]. Each
// instance's `batch` is its number of decode slots (sequences decoded together).
struct GenerationConfig {
  bool enabled = false;         // the model is generative (a `generation:` section)
  std::string refill = "step";  // top-up policy: step, half (the paper's), or static
  int64_t max_tokens = 256;     // the most tokens one request may ask for
  int64_t default_max_tokens = 16;
  int64_t max_prompt_tokens = 1024;  // longest prompt accepted (also bounded by the model)
};

// `emulate:` — the model is served by emulated runtimes (packrat-emulated-runtime, emulator/):
// no libtorch, nothing computed; a slice of b rows at t threads lasts the profile's L[t,b]
// under the contention of the node's other emulated threads, outputs are zero-filled.
struct EmulateConfig {
  bool enabled = false;
  std::string profile;            // CSV L[t,b] (absolute after loading); with `instances:
                                  // auto` also the model's profile (nothing is measured)
  double load_s = 1.0;            // a runtime's model load: seconds of one CPU
  double neighbour_slowdown = 0;  // slower by 1 + this x the share of other CPUs busy
  // The truth the runtimes emulate where it differs from `profile` (emulator/latency_truth.h):
  std::string truth;         // another CSV profile (absolute after loading); empty: profile
  double profile_error = 0;  // each point ⟨t,b⟩ of it scaled by a factor in [1 − e, 1 + e]
  double jitter_cv = 0;      // each slice times a lognormal of mean 1 and this CV
  int64_t seed = 0;          // fixes the profile error's factors, seeds the jitter
  // Set by the agent (ResolveEmulation, agent/pool/virtual_node.h):
  std::string node_state;     // the node's shared CPU state; empty: no contention
  bool virtual_node = false;  // CPUs are virtual: passed to runtimes, never pinned
};

struct ModelConfig {
  std::string name;
  std::string path;  // absolute after loading; may be empty with `emulate`
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  BatchingConfig batching;
  // The static plan, or empty with auto_instances: the agent profiles the model (or reuses its
  // stored profile) and starts on the optimizer's plan for B = batching.max_batch, or, with a
  // batch-latency limit, the smallest B near the most rows/s within it (FirstPlan).
  std::vector<InstanceGroup> instances;
  bool auto_instances = false;
  int auto_threads = 0;  // T for auto plans; 0 = every core the agent may use
  // A profile measured elsewhere (`packrat profile` on a node of the same kind), absolute after
  // loading: `instances: auto` plans on it as it is and measures nothing. Empty: the agent's
  // stored profile, measured at start where there is none.
  std::string profile;
  // The joint partition of the node's CPUs (agent/planning/joint_partition.h): the fewest CPUs
  // the model keeps, even without traffic, and how much its p99 ratio counts against others'.
  int min_threads = 1;
  double weight = 1;
  int warmup_iterations = 3;
  int startup_timeout_s = 300;
  // A runtime with work that reports nothing for this long is killed and replaced (its slices
  // are retried once elsewhere; a decoder's sequences fail). 0 = never.
  int slice_timeout_s = 60;
  ReconfigurationConfig reconfiguration;
  GenerationConfig generation;
  OptimizeConfig optimize;  // as written (may say auto)
  AccuracyConfig accuracy;
  EmulateConfig emulate;
  // The resolved settings the runtimes use; FP32 contiguous until the agent resolves
  // `optimize` (Agent::Start, `packrat profile`).
  KernelSettings kernel;

  // B: rows one aggregated batch aims for: Σ count·batch over the instance groups, or
  // batching.max_batch for auto plans.
  int64_t TargetBatch() const;
  ModelSignature Signature() const;
};

// A file or folder the config names, and where it names it ("file:line: key").
struct NamedPath {
  std::string path;  // resolved against the config's folder
  bool folder = false;
  std::string where;
};

struct Config {
  std::string source;  // the file it was read from
  ServerConfig server;
  std::vector<ModelConfig> models;
  // The model files, the repository folder and the Unix sockets' folders it names (not
  // emulated models' files).
  std::vector<NamedPath> named_paths;
};

// InvalidArgument "file:line: key: 'PATH' ..." where `named` is not there (a file that cannot
// be read, a folder that is not one); else OK.
Status CheckNamedPath(const NamedPath& named);
// CheckNamedPath of each of config.named_paths: the first that fails, else OK. The agent
// checks at start, as a config error; LoadConfig does not, so that a config can be validated
// away from the node it is written for.
Status CheckNamedPaths(const Config& config);

// Parses and validates a config file. Never throws.
StatusOr<Config> LoadConfig(const std::string& path);
// The model in repository folder `folder` (server.model_repository/NAME): `folder`/model.yaml
// holds one `models[]` entry's keys; the model is named after the folder. NotFound without
// model.yaml; InvalidArgument "file:line: key: what" for anything wrong in it.
StatusOr<ModelConfig> LoadRepositoryModel(const std::string& folder);
// Same, from text; `source` names it in errors and relative model paths resolve against
// `base_dir`.
StatusOr<Config> ParseConfig(const std::string& text, const std::string& source,
                             const std::string& base_dir);
// "127.0.0.1:8080" -> {host, port}; "[::1]:80" for IPv6.
StatusOr<Endpoint> ParseEndpoint(const std::string& text);

}  // namespace packrat
