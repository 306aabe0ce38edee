// packrat-agent: the per-node Packrat agent.
//
//   packrat-agent --config FILE.yaml [--port-file FILE] [--runtime PATH] [--version] [--help]
//
// Exit codes: 0 after a graceful SIGTERM/SIGINT shutdown, 1 when start-up fails (bad config,
// port in use, ..., or with strict readiness a model asked for at start that did not load),
// 2 on bad usage.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/stop_signals.h"

#ifndef PACKRAT_VERSION
#define PACKRAT_VERSION "unknown"
#endif

namespace {

std::string DefaultRuntimePath() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "packrat-runtime";
  return (self.parent_path() / "packrat-runtime").string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "The per-node Packrat agent: serves the models of FILE.yaml over KServe v2 (REST) with thin "
      "runtime instances, their management API and Prometheus metrics. Every config key: "
      "docs/configuration.md.",
      "packrat-agent");
  std::string config_path, port_file, runtime_path;
  app.add_option("--config", config_path, "the agent's YAML configuration")
      ->required()
      ->type_name("FILE.yaml");
  app.add_option("--port-file", port_file,
                 "write {\"http\":P,\"management\":Q,\"metrics\":R} here once listening (for "
                 "port 0)")
      ->type_name("FILE");
  app.add_option("--runtime", runtime_path,
                 "packrat-runtime [default: server.runtime_path, else next to this binary]")
      ->type_name("PATH");
  app.set_version_flag("--version", std::string("packrat-agent ") + PACKRAT_VERSION);
  app.footer(
      "example: packrat-agent --config /etc/packrat/packrat.yaml\n"
      "exit codes: 0 after SIGTERM/SIGINT, 1 when start-up fails, 2 on bad usage");
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (std::optional<int> exit =
          packrat::ParseCommandLine(app, args, "packrat-agent", std::cout, std::cerr)) {
    return *exit;
  }
  packrat::SetLogComponent("agent");

  packrat::StopSignals stop_signals;  // before any thread starts

  auto config = packrat::LoadConfig(config_path);
  if (config.ok()) {
    if (packrat::Status files = packrat::CheckNamedPaths(*config); !files.ok()) config = files;
  }
  if (!config.ok()) {
    std::cerr << "packrat-agent: " << config.status().message() << "\n";
    return 1;
  }
  // Every line from here on, the runtimes' too (they inherit PACKRAT_LOG_FORMAT).
  if (config->server.log_json) packrat::SetLogFormat(packrat::LogFormat::kJson);
  packrat::AgentOptions options;
  options.config = std::move(config).value();
  options.port_file = port_file;
  options.runtime_path = runtime_path.empty() ? DefaultRuntimePath() : runtime_path;
  if (!options.config.server.runtime_path.empty() && runtime_path.empty()) {
    options.runtime_path = options.config.server.runtime_path;
  }
  options.on_startup_failure = &packrat::StopSignals::Request;
  auto agent = packrat::Agent::Start(std::move(options));
  if (!agent.ok()) {
    PACKRAT_LOG(ERROR) << "cannot start: " << agent.status().message();
    return 1;
  }
  const int sig = stop_signals.Wait();
  if (packrat::Status failed = (*agent)->StartupFailure(); !failed.ok()) {
    (*agent)->Shutdown();
    PACKRAT_LOG(ERROR) << "cannot start: " << failed.message();
    return 1;
  }
  PACKRAT_LOG(INFO) << "received signal " << sig;
  (*agent)->Shutdown();
  return 0;
}
