#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "agent/pool/cgroup_info.h"
#include "agent/pool/cpu_list.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "shm/segment.h"

namespace packrat {
namespace {

Status WritePortFile(const std::string& path, uint16_t http, uint16_t management,
                     uint16_t metrics) {
  return WriteFileAtomically(path, "{\"http\":" + std::to_string(http) +
                                       ",\"management\":" + std::to_string(management) +
                                       ",\"metrics\":" + std::to_string(metrics) + "}\n");
}

}  // namespace

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options) {
  if (access(options.runtime_path.c_str(), X_OK) != 0) {
    return NotFound("runtime executable '" + options.runtime_path + "' not found");
  }
  for (const std::string& name : shm::Segment::RemoveStale()) {
    PACKRAT_LOG(INFO) << "removed stale shared-memory segment " << name;
  }
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  const Config& config = agent->options_.config;
  if (!config.server.management_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token, ReadManagementToken(config.server.management_token_file));
    agent->management_handler_.set_token(std::move(token));
    PACKRAT_LOG(INFO) << "the management API needs the bearer token in "
                      << config.server.management_token_file;
  } else if (config.server.management.host != "127.0.0.1" &&
             config.server.management.host != "::1" &&
             config.server.management.host != "localhost") {
    PACKRAT_LOG(WARNING) << "the management API listens on " << config.server.management.host
                         << " without a token: anyone who reaches it can change what this node "
                         << "serves (server.management_token_file)";
  }
  ASSIGN_OR_RETURN(agent->metrics_, metrics::AgentMetrics::Create());
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
  agent->allocator_ = std::make_unique<ResourceAllocator>(
      CpuTopology::Read("", usable), cgroup.ThreadBudget(static_cast<int>(usable.size())));
  agent->cpusets_ = config.server.cgroups ? CpusetController::Open(cgroup, getpid())
                                          : CpusetController::AffinityOnly("server.cgroups is off");
  PACKRAT_LOG(INFO) << "cores: " << agent->allocator_->topology().Describe()
                    << ", thread budget T=" << agent->allocator_->thread_budget()
                    << (cgroup.cpu_limit ? " (CPU quota " + std::to_string(*cgroup.cpu_limit) + ")"
                                         : std::string());
  if (agent->cpusets_->enabled()) {
    PACKRAT_LOG(INFO) << "runtimes get cpuset cgroups: " << agent->cpusets_->describe();
  } else {
    PACKRAT_LOG(WARNING) << "runtimes are pinned with " << agent->cpusets_->describe();
  }
  const CpuFeatures cpu = ReadCpuFeatures();
  for (ModelConfig m : config.models) {
    m.kernel = ResolveKernelSettings(m.optimize, cpu, m.inputs);
    if (!m.kernel.is_default()) {
      PACKRAT_LOG(INFO) << "model '" << m.name << "': kernel settings " << m.kernel.Key()
                        << " (cpu bf16: " << (cpu.bf16() ? "yes" : "no") << ")";
    }
    if (m.kernel.precision == Precision::kBf16 && !cpu.bf16()) {
      PACKRAT_LOG(WARNING) << "model '" << m.name << "': bf16 on a CPU without AVX-512-BF16 or "
                           << "AMX is emulated and slow";
    }
    ServedModelOptions options;
    options.runtime_path = agent->options_.runtime_path;
    options.profile_dir = config.server.profile_dir;
    options.allocator = agent->allocator_.get();
    options.cpusets = agent->cpusets_.get();
    options.metrics = &agent->metrics_->ForModel(m.name);
    options.runtime_idle_spin_us = config.server.runtime_idle_spin_us;
    options.on_change = [watch = &agent->config_watch_] { watch->Changed(); };
    agent->models_.emplace(m.name,
                           std::make_unique<ServedModel>(m, std::move(options), &agent->launcher_));
  }

  HttpServerOptions http;
  http.endpoint = config.server.http;
  http.threads = config.server.io_threads;
  http.max_body_bytes = config.server.max_body_bytes;
  http.max_header_bytes = config.server.max_header_bytes;
  http.idle_timeout = std::chrono::seconds(config.server.idle_timeout_s);
  http.read_timeout = std::chrono::seconds(config.server.read_timeout_s);
  http.max_connections = config.server.max_connections;
  http.unix_socket = config.server.unix_socket;
  ASSIGN_OR_RETURN(agent->http_, HttpServer::Create(http, &agent->handler_));
  HttpServerOptions management = http;
  management.endpoint = config.server.management;
  management.unix_socket.clear();
  management.threads = 1;
  management.name = "management";
  ASSIGN_OR_RETURN(agent->management_, HttpServer::Create(management, &agent->management_handler_));
  HttpServerOptions metrics = management;
  metrics.endpoint = config.server.metrics;
  metrics.name = "metrics";
  ASSIGN_OR_RETURN(agent->metrics_server_,
                   HttpServer::Create(metrics, agent->metrics_handler_.get()));
  if (!agent->options_.port_file.empty()) {
    RETURN_IF_ERROR(WritePortFile(agent->options_.port_file, agent->http_port(),
                                  agent->management_port(), agent->metrics_port()));
  }
  agent->http_->Start();
  agent->management_->Start();
  agent->metrics_server_->Start();
  PACKRAT_LOG(INFO) << "listening: http=" << config.server.http.host << ":" << agent->http_port()
                    << " management=" << config.server.management.host << ":"
                    << agent->management_port() << " metrics=" << config.server.metrics.host << ":"
                    << agent->metrics_port() << (config.server.unix_socket.empty() ? "" : " unix=")
                    << config.server.unix_socket;
  Agent* raw = agent.get();
  agent->loader_ = std::thread([raw] { raw->LoadModels(); });
  return agent;
}

Agent::~Agent() { Shutdown(); }

void Agent::LoadModels() {
  int ready = 0;
  for (auto& [name, model] : models_) {
    if (model->Load().ok()) ++ready;
  }
  PACKRAT_LOG(INFO) << "models loaded: " << ready << " of " << models_.size() << " ready";
}

void Agent::WaitForModels() {
  if (loader_.joinable()) loader_.join();
}

void Agent::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  handler_.SetShuttingDown();  // before the log line, which says it has happened
  PACKRAT_LOG(INFO) << "shutting down: not ready from now on";
  if (const int delay = options_.config.server.drain_delay_s; delay > 0) {
    // Keep serving while load balancers and Kubernetes endpoints notice the failing readiness.
    PACKRAT_LOG(INFO) << "serving " << delay << " s more before closing the listeners";
    std::this_thread::sleep_for(std::chrono::seconds(delay));
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(options_.config.server.shutdown_timeout_s);
  http_->StopAccepting();
  management_->StopAccepting();
  metrics_server_->StopAccepting();
  WaitForModels();
  // Models drain first so every accepted request gets its answer, then the servers write them.
  for (auto& [name, model] : models_) {
    model->Stop(std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()));
  }
  config_watch_.Stop();  // long polls of the management API get their answer now
  http_->Stop(deadline);
  management_->Stop(deadline);
  metrics_server_->Stop(deadline);
  PACKRAT_LOG(INFO) << "shut down";
}

}  // namespace packrat
