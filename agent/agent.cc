#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent/grpc/grpc_server.h"
#include "agent/pool/cgroup_info.h"
#include "agent/pool/cpu_list.h"
#include "agent/pool/virtual_node.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "shm/segment.h"

namespace packrat {
namespace {

Status WritePortFile(const std::string& path, uint16_t http, uint16_t management, uint16_t metrics,
                     uint16_t grpc) {
  return WriteFileAtomically(
      path, "{\"http\":" + std::to_string(http) + ",\"management\":" + std::to_string(management) +
                ",\"metrics\":" + std::to_string(metrics) +
                (grpc != 0 ? ",\"grpc\":" + std::to_string(grpc) : std::string()) + "}\n");
}

// The gRPC server of `server.grpc`, or null when it is off. A port that cannot be bound is a
// start-up error where `server.grpc` is configured; the default (127.0.0.1:8001, which another
// agent on the node may hold) only warns.
StatusOr<std::unique_ptr<GrpcServer>> StartGrpc(
    const ServerConfig& server, const ModelRegistry* models, RepositoryControl* repository,
    const ControlGate& gate, SharedMemoryRegistry* shared_memory, const AccessLog* access_log) {
  if (!server.grpc_enabled) return std::unique_ptr<GrpcServer>();
  GrpcServerOptions grpc;
  grpc.endpoint = server.grpc;
  grpc.max_message_bytes = server.grpc_max_message_bytes;
  grpc.max_concurrent_streams = server.grpc_max_concurrent_streams;
  grpc.control_gate = gate;
  grpc.unix_socket = server.grpc_unix_socket;
  grpc.shared_memory = shared_memory;
  grpc.access_log = access_log;
  StatusOr<std::unique_ptr<GrpcServer>> started = GrpcServer::Start(grpc, models, repository);
  if (started.ok()) return started;
  if (server.grpc_explicit) return started.status().WithContext("server.grpc");
  PACKRAT_LOG(WARNING) << "serving without gRPC: " << started.status().message()
                       << " (set server.grpc to choose its address, or off)";
  return std::unique_ptr<GrpcServer>();
}

// server.profile_dir, where a model of `instances: auto` (configured, or from the repository)
// keeps its profile: created, and writable, or an error that names it. Checked at start, so
// that such a model does not fail later for it, after minutes of profiling.
Status CheckProfileDir(const Config& config) {
  const bool profiles = !config.server.model_repository.empty() ||
                        std::any_of(config.models.begin(), config.models.end(),
                                    [](const ModelConfig& m) { return m.auto_instances; });
  if (!profiles) return Status::Ok();
  const std::string& dir = config.server.profile_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK | X_OK) != 0) {
    return FailedPrecondition("server.profile_dir: cannot write '" + dir +
                              "': " + (ec ? ec.message() : std::string(strerror(errno))));
  }
  return Status::Ok();
}

}  // namespace

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options) {
  RETURN_IF_ERROR(CheckRuntimes(options.config, options.runtime_path));
  RETURN_IF_ERROR(CheckProfileDir(options.config));
  for (const std::string& name : shm::Segment::RemoveStale()) {
    PACKRAT_LOG(INFO) << "removed stale shared-memory segment " << name;
  }
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  const Config& config = agent->options_.config;
  // One gate for every control path: the management API and the gRPC repository RPCs.
  ControlGate gate;
  if (!config.server.management_token_file.empty()) {
    ASSIGN_OR_RETURN(gate, ControlGate::FromFile(config.server.management_token_file));
    PACKRAT_LOG(INFO) << "the management API and the gRPC repository calls need the bearer "
                      << "token in " << config.server.management_token_file;
  } else if (config.server.management.host != "127.0.0.1" &&
             config.server.management.host != "::1" &&
             config.server.management.host != "localhost") {
    PACKRAT_LOG(WARNING) << "the management API listens on " << config.server.management.host
                         << " without a token: anyone who reaches it can change what this node "
                         << "serves (server.management_token_file)";
  }
  agent->management_handler_.set_gate(gate);
  agent->handler_.set_gate(gate);
  if (const SharedMemoryOptions& shm = config.server.shared_memory;
      shm.enabled && !std::filesystem::is_directory(shm.dir)) {
    return NotFound("server.shared_memory.dir: no folder '" + shm.dir + "'");
  }
  agent->shared_memory_ = std::make_unique<SharedMemoryRegistry>(config.server.shared_memory);
  agent->handler_.set_shared_memory(agent->shared_memory_.get());
  metrics::AgentMetricsOptions metrics_options;
  metrics_options.version = PACKRAT_VERSION;
  ASSIGN_OR_RETURN(agent->metrics_, metrics::AgentMetrics::Create(metrics_options));
  agent->metrics_handler_ = std::make_unique<MetricsHandler>(agent->metrics_.get());

  // Cores: the affinity mask, within the cgroup's cpuset; T capped by the CPU quota.
  const CgroupInfo cgroup = ReadCgroupInfo("");
  std::vector<int> usable = AffinityCpus();
  if (cgroup.cpus) {
    std::erase_if(usable, [&](int c) {
      return std::find(cgroup.cpus->begin(), cgroup.cpus->end(), c) == cgroup.cpus->end();
    });
  }
  if (usable.empty()) usable = AffinityCpus();
  ASSIGN_OR_RETURN(agent->virtual_node_, VirtualNode::Create(config, usable));
  if (agent->virtual_node_) PACKRAT_LOG(INFO) << agent->virtual_node_->Describe();
  if (agent->virtual_node_ && agent->virtual_node_->is_virtual()) {
    agent->allocator_ = std::make_unique<ResourceAllocator>(agent->virtual_node_->topology(),
                                                            config.server.virtual_cpus);
    agent->cpusets_ = CpusetController::AffinityOnly("virtual node");
  } else {
    agent->allocator_ = std::make_unique<ResourceAllocator>(
        CpuTopology::Read("", usable), cgroup.ThreadBudget(static_cast<int>(usable.size())));
    agent->cpusets_ = config.server.cgroups
                          ? CpusetController::Open(cgroup, getpid())
                          : CpusetController::AffinityOnly("server.cgroups is off");
  }
  PACKRAT_LOG(INFO) << "cores: " << agent->allocator_->topology().Describe()
                    << ", thread budget T=" << agent->allocator_->thread_budget()
                    << (cgroup.cpu_limit ? " (CPU quota " + std::to_string(*cgroup.cpu_limit) + ")"
                                         : std::string());
  if (agent->cpusets_->enabled()) {
    PACKRAT_LOG(INFO) << "runtimes get cpuset cgroups: " << agent->cpusets_->describe();
  } else if (!agent->virtual_node_ || !agent->virtual_node_->is_virtual()) {
    PACKRAT_LOG(WARNING) << "runtimes are pinned with " << agent->cpusets_->describe();
  }
  for (const ModelConfig& m : config.models) {
    ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> model, agent->MakeModel(m));
    agent->models_.Put(m.name, std::move(model));
  }
  if (config.server.node_partition) {
    NodeControllerOptions node;
    node.registry = &agent->models_;
    node.allocator = agent->allocator_.get();
    node.metrics = agent->metrics_.get();
    node.interval = std::chrono::milliseconds(config.server.partition_interval_ms);
    agent->node_ = std::make_unique<NodeController>(std::move(node));
    agent->management_handler_.set_node_partition(
        [node = agent->node_.get()] { return node->Json(); });
  }
  ModelRepositoryOptions repository;
  repository.dir = config.server.model_repository;
  repository.load_all = config.server.load_all_models;
  repository.make_model = [raw = agent.get()](const ModelConfig& m) { return raw->MakeModel(m); };
  repository.allocator = agent->allocator_.get();
  repository.drain = std::chrono::seconds(config.server.shutdown_timeout_s);
  if (NodeController* node = agent->node_.get()) {
    repository.make_room = [node](const std::string& name, int cpus) {
      return node->MakeRoom(name, cpus);
    };
    repository.on_change = [node] { node->Changed(); };
  }
  agent->repository_ = std::make_unique<ModelRepository>(&agent->models_, std::move(repository));
  // Not ready until the loader thread has loaded what the config and the repository ask for;
  // none of those models is unknown to a front end meanwhile.
  agent->models_.set_strict_readiness(config.server.strict_readiness);
  agent->models_.set_starting(true);
  agent->repository_->ExpectAll();
  agent->management_handler_.set_repository(agent->repository_.get());

  if (config.server.access_log != "off") {
    ASSIGN_OR_RETURN(agent->access_log_, AccessLog::Open(config.server.access_log == "json"
                                                             ? AccessLog::Format::kJson
                                                             : AccessLog::Format::kLogfmt,
                                                         config.server.access_log_path));
  }
  HttpServerOptions http;
  http.endpoint = config.server.http;
  http.access_log = agent->access_log_.get();
  http.threads = config.server.io_threads;
  http.max_body_bytes = config.server.max_body_bytes;
  http.max_header_bytes = config.server.max_header_bytes;
  http.idle_timeout = std::chrono::seconds(config.server.idle_timeout_s);
  http.read_timeout = std::chrono::seconds(config.server.read_timeout_s);
  http.max_connections = config.server.max_connections;
  http.unix_socket = config.server.unix_socket;
  // Each listener's error names its key: "server.metrics: cannot listen on ...".
  const auto listen = [](const HttpServerOptions& o, HttpHandler* handler,
                         std::string_view key) -> StatusOr<std::unique_ptr<HttpServer>> {
    StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Create(o, handler);
    if (!server.ok()) return server.status().WithContext(key);
    return server;
  };
  ASSIGN_OR_RETURN(agent->http_, listen(http, &agent->handler_, "server.http"));
  HttpServerOptions management = http;
  management.endpoint = config.server.management;
  management.unix_socket.clear();
  management.threads = 1;
  management.name = "management";
  ASSIGN_OR_RETURN(agent->management_,
                   listen(management, &agent->management_handler_, "server.management"));
  HttpServerOptions metrics = management;
  metrics.endpoint = config.server.metrics;
  metrics.name = "metrics";
  metrics.access_log = nullptr;  // scrapes every few seconds are not what operators look for
  ASSIGN_OR_RETURN(agent->metrics_server_,
                   listen(metrics, agent->metrics_handler_.get(), "server.metrics"));
  ASSIGN_OR_RETURN(agent->grpc_,
                   StartGrpc(config.server, &agent->models_, agent->repository_.get(), gate,
                             agent->shared_memory_.get(), agent->access_log_.get()));
  if (!agent->options_.port_file.empty()) {
    RETURN_IF_ERROR(WritePortFile(agent->options_.port_file, agent->http_port(),
                                  agent->management_port(), agent->metrics_port(),
                                  agent->grpc_port()));
  }
  agent->http_->Start();
  agent->management_->Start();
  agent->metrics_server_->Start();
  agent->serving_ = true;
  PACKRAT_LOG(INFO) << "listening: http=" << config.server.http.host << ":" << agent->http_port()
                    << " management=" << config.server.management.host << ":"
                    << agent->management_port() << " metrics=" << config.server.metrics.host << ":"
                    << agent->metrics_port() << (config.server.unix_socket.empty() ? "" : " unix=")
                    << config.server.unix_socket
                    << (agent->grpc_ ? " grpc=" + config.server.grpc.host + ":" +
                                           std::to_string(agent->grpc_port())
                                     : std::string())
                    << (agent->grpc_ && !config.server.grpc_unix_socket.empty()
                            ? " grpc_unix=" + config.server.grpc_unix_socket
                            : std::string());
  Agent* raw = agent.get();
  agent->loader_ = std::thread([raw] { raw->LoadModels(); });
  return agent;
}

Agent::~Agent() { Shutdown(); }

uint16_t Agent::grpc_port() const { return grpc_ ? grpc_->port() : 0; }

StatusOr<std::shared_ptr<ServedModel>> Agent::MakeModel(ModelConfig m) {
  static const CpuFeatures cpu = ReadCpuFeatures();
  StatusOr<KernelSettings> kernel = ResolveKernelSettings(m.optimize, cpu, m.inputs);
  if (!kernel.ok()) return kernel.status().WithContext("model '" + m.name + "'");
  m.kernel = *kernel;
  ResolveEmulation(virtual_node_.get(), &m);
  if (!m.kernel.is_default()) {
    PACKRAT_LOG(INFO) << "model '" << m.name << "': kernel settings " << m.kernel.Key()
                      << " (cpu bf16: " << (cpu.bf16() ? "yes" : "no") << ")";
  }
  if (m.kernel.precision == Precision::kBf16 && !cpu.bf16()) {
    PACKRAT_LOG(WARNING) << "model '" << m.name << "': bf16 on a CPU without AVX-512-BF16 or "
                         << "AMX is emulated, about 30x slower (optimize.allow_emulated_bf16)";
  }
  ServedModelOptions options;
  options.runtime_path = options_.runtime_path;
  options.profile_dir = options_.config.server.profile_dir;
  options.allocator = allocator_.get();
  options.cpusets = cpusets_.get();
  options.metrics = &metrics_->AcquireModel(m.name);
  options.runtime_idle_spin_us = options_.config.server.runtime_idle_spin_us;
  options.on_change = [watch = &config_watch_] { watch->Changed(); };
  // The series go with the last version of the model (a reload shares them; an unload's go
  // once no request holds the model any more).
  metrics::AgentMetrics* metrics = metrics_.get();
  const std::string name = m.name;
  return std::shared_ptr<ServedModel>(new ServedModel(std::move(m), std::move(options), &launcher_),
                                      [metrics, name](ServedModel* model) {
                                        delete model;
                                        metrics->ReleaseModel(name);
                                      });
}

void Agent::LoadModels() {
  int ready = 0;
  Status first_failure;
  const std::vector<std::shared_ptr<ServedModel>> configured = models_.List();
  // The node partition's models load last, each on its share of what the others left free.
  for (const bool partitioned : {false, true}) {
    if (partitioned && node_) node_->SplitFreeCpus(configured);
    for (const std::shared_ptr<ServedModel>& model : configured) {
      if ((node_ != nullptr && model->PartitionCandidate()) != partitioned) continue;
      const LogScope log_scope(model->name());
      if (Status s = model->Load(); s.ok()) {
        ++ready;
      } else if (first_failure.ok()) {
        first_failure = s.WithContext("model '" + model->name() + "'");
      }
    }
  }
  const ModelRepository::StartLoad repository = repository_->LoadAll();
  if (first_failure.ok()) first_failure = repository.first_failure;
  models_.set_starting(false);  // before the line that says start-up is over
  PACKRAT_LOG(INFO) << "models loaded: " << ready + repository.loaded << " of "
                    << configured.size() + repository.tried << " ready";
  // Strict readiness serves what was asked for or nothing: a model that did not load ends the
  // agent, as a port in use does, instead of leaving a node that never turns ready.
  if (!first_failure.ok() && options_.config.server.strict_readiness) {
    {
      MutexLock lock(&startup_mu_);
      startup_failure_ = first_failure;
    }
    if (options_.on_startup_failure) options_.on_startup_failure();
    return;
  }
  if (node_) node_->Start();  // the partition starts from the models as loaded
}

Status Agent::StartupFailure() const {
  MutexLock lock(&startup_mu_);
  return startup_failure_;
}

void Agent::WaitForModels() {
  if (loader_.joinable()) loader_.join();
}

void Agent::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // A start that failed served nothing and loaded nothing: what it built goes with its
  // members, and there is nothing to drain.
  if (!serving_) return;
  handler_.SetShuttingDown();  // before the log line, which says it has happened
  if (grpc_) grpc_->SetShuttingDown();
  PACKRAT_LOG(INFO) << "shutting down: not ready from now on";
  // A node that never turned ready has no endpoints for load balancers to take it out of.
  if (const int delay = options_.config.server.drain_delay_s; delay > 0 && StartupFailure().ok()) {
    // Keep serving while load balancers and Kubernetes endpoints notice the failing readiness.
    PACKRAT_LOG(INFO) << "serving " << delay << " s more before closing the listeners";
    std::this_thread::sleep_for(std::chrono::seconds(delay));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(options_.config.server.shutdown_timeout_s);
  http_->StopAccepting();
  management_->StopAccepting();
  metrics_server_->StopAccepting();
  if (grpc_) grpc_->StopAccepting();  // calls in flight go on
  WaitForModels();
  if (node_) node_->Stop();  // a move in progress finishes first
  repository_->Shutdown();   // loads and unloads in progress finish; no new ones
  management_handler_.JoinRepositoryCalls();
  // Models drain first so every accepted request gets its answer, then the servers write them.
  for (const std::shared_ptr<ServedModel>& model : models_.List()) {
    model->Stop(std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()));
  }
  config_watch_.Stop();  // long polls of the management API get their answer now
  http_->Stop(deadline);
  management_->Stop(deadline);
  metrics_server_->Stop(deadline);
  if (grpc_) grpc_->Stop(deadline);  // every ModelInfer was answered with its model
  PACKRAT_LOG(INFO) << "shut down";
}

}  // namespace packrat
