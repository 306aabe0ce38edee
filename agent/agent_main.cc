// packrat-agent: the per-node Packrat agent.
//
//   packrat-agent --config FILE.yaml [--port-file FILE] [--runtime PATH]
//
// Exit codes: 0 after a graceful SIGTERM/SIGINT shutdown, 1 when start-up fails (bad config,
// port in use, ...), 2 on bad usage.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "agent/agent.h"
#include "common/logging.h"
#include "common/stop_signals.h"

namespace {

std::string DefaultRuntimePath() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "packrat-runtime";
  return (self.parent_path() / "packrat-runtime").string();
}

int Usage() {
  std::cerr << "usage: packrat-agent --config FILE.yaml [--port-file FILE] [--runtime PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, port_file, runtime_path;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return Usage(), 0;
    if (i + 1 >= argc) return Usage();
    const std::string value = argv[++i];
    if (flag == "--config") {
      config_path = value;
    } else if (flag == "--port-file") {
      port_file = value;
    } else if (flag == "--runtime") {
      runtime_path = value;
    } else {
      std::cerr << "packrat-agent: unknown flag " << flag << "\n";
      return Usage();
    }
  }
  if (config_path.empty()) return Usage();
  packrat::SetLogComponent("agent");

  packrat::StopSignals stop_signals;  // before any thread starts

  auto config = packrat::LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "packrat-agent: " << config.status().message() << "\n";
    return 1;
  }
  packrat::AgentOptions options;
  options.config = std::move(config).value();
  options.port_file = port_file;
  options.runtime_path = runtime_path.empty() ? DefaultRuntimePath() : runtime_path;
  if (!options.config.server.runtime_path.empty() && runtime_path.empty()) {
    options.runtime_path = options.config.server.runtime_path;
  }
  auto agent = packrat::Agent::Start(std::move(options));
  if (!agent.ok()) {
    PACKRAT_LOG(ERROR) << "cannot start: " << agent.status().message();
    return 1;
  }
  const int sig = stop_signals.Wait();
  PACKRAT_LOG(INFO) << "received signal " << sig;
  (*agent)->Shutdown();
  return 0;
}
