// packrat-agent: the per-node Packrat agent.
//
//   packrat-agent --config FILE.yaml [--port-file FILE] [--runtime PATH] [--version] [--help]
//   packrat-agent --check-config FILE.yaml
//
// Exit codes: 0 after a graceful SIGTERM/SIGINT shutdown, 1 when start-up fails (bad config,
// port in use, ..., or with strict readiness a model asked for at start that did not load),
// 2 on bad usage. --check-config: 0 when the file is valid, 1 when not.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "agent/config/config_writer.h"
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

// --check-config: validates the file as the agent's start would, without starting anything
// or touching the node, and prints the config the agent would serve (config_writer.h). Files
// and folders the config names are looked for, but one that is not here is only a note: the
// check may run away from the node (a CI pipeline, the chart's pre-install hook). The models of
// a repository that is here are validated too. 0: valid; 1: not, with one line per problem.
int CheckConfig(const std::string& path) {
  auto config = packrat::LoadConfig(path);
  if (!config.ok()) {
    std::cerr << "packrat-agent: " << config.status().message() << "\n";
    return 1;
  }
  int errors = 0;
  for (const packrat::NamedPath& named : config->named_paths) {
    if (packrat::Status there = packrat::CheckNamedPath(named); !there.ok()) {
      std::cerr << "packrat-agent: note: " << there.message()
                << " here (the agent checks again where it starts)\n";
    }
  }
  std::vector<std::string> repository_models;
  std::error_code ec;
  const std::string& repository = config->server.model_repository;
  if (!repository.empty() && std::filesystem::is_directory(repository, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(repository, ec)) {
      if (!entry.is_directory(ec)) continue;
      auto model = packrat::LoadRepositoryModel(entry.path().string());
      if (model.ok()) {
        repository_models.push_back(model->name);
      } else if (model.status().code() != packrat::StatusCode::kNotFound) {
        std::cerr << "packrat-agent: " << model.status().message() << "\n";
        ++errors;
      }
    }
  }
  if (errors > 0) return 1;
  std::sort(repository_models.begin(), repository_models.end());
  std::cout << "# " << path << ": valid. The config packrat-agent serves, every key resolved.\n";
  if (!repository_models.empty()) {
    std::cout << "# Repository models, each valid:";
    for (const std::string& name : repository_models) std::cout << ' ' << name;
    std::cout << "\n";
  }
  std::cout << packrat::WriteConfig(*config);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "The per-node Packrat agent: serves the models of FILE.yaml over KServe v2 (REST) with thin "
      "runtime instances, their management API and Prometheus metrics. Every config key: "
      "docs/configuration.md.",
      "packrat-agent");
  std::string config_path, check_path, port_file, runtime_path;
  CLI::Option* config_option =
      app.add_option("--config", config_path, "the agent's YAML configuration")
          ->type_name("FILE.yaml");
  app.add_option("--check-config", check_path,
                 "validate FILE.yaml, print the config the agent would serve with every key "
                 "resolved, and exit: 0 valid, 1 not")
      ->type_name("FILE.yaml")
      ->excludes(config_option);
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
  if (!check_path.empty()) return CheckConfig(check_path);
  if (config_path.empty()) {
    std::cerr << "packrat-agent: error: --config FILE.yaml is required (or --check-config "
                 "FILE.yaml)\nrun 'packrat-agent --help' for usage\n";
    return packrat::kExitBadUsage;
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
