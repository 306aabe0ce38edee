// packrat-forward: the sidecar forwarder. Listens inside the application pod and splices every
// connection to the node agent (agent/forward/forwarder.h).
//
//   packrat-forward --upstream unix:/run/packrat/agent.sock|tcp:HOST:PORT
//                   [--listen 127.0.0.1:8080] [--connect-timeout-ms 1000] [--threads 1]
//                   [--shutdown-timeout-s 20] [--port-file FILE]
//
// --port-file receives {"listen":P} once listening (useful with port 0). SIGTERM/SIGINT: stop
// accepting, let open connections end for up to --shutdown-timeout-s, exit 0. Exit codes: 0
// after a signal, 1 when start-up fails (bad upstream, port in use, ...), 2 on bad usage.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/forward/forwarder.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/stop_signals.h"

#ifndef PACKRAT_VERSION
#define PACKRAT_VERSION "unknown"
#endif

namespace {

bool WritePortFile(const std::string& path, uint16_t port) {
  return packrat::WriteFileAtomically(path, "{\"listen\":" + std::to_string(port) + "}\n").ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "The sidecar forwarder of an application pod: listens inside the pod and splices every "
      "connection to the node's Packrat agent, over its Unix socket or TCP.",
      "packrat-forward");
  packrat::ForwarderOptions options;
  std::string upstream, port_file, listen = "127.0.0.1:8080";
  int connect_timeout_ms = 1000, threads = 1, shutdown_timeout_s = 20;
  app.add_option("--upstream", upstream, "the agent: unix:PATH or tcp:HOST:PORT")
      ->required()
      ->type_name("ADDRESS");
  app.add_option("--listen", listen, "where the application connects (port 0: pick one)")
      ->capture_default_str()
      ->check([](const std::string& text) {
        const auto endpoint = packrat::ParseEndpoint(text);
        return endpoint.ok() ? std::string() : endpoint.status().message();
      })
      ->type_name("HOST:PORT");
  app.add_option("--connect-timeout-ms", connect_timeout_ms,
                 "how long a connection to the agent may take")
      ->capture_default_str()
      ->check(packrat::Between(1, 3'600'000))
      ->type_name("MS");
  app.add_option("--threads", threads, "I/O threads")
      ->capture_default_str()
      ->check(packrat::Between(1, 64))
      ->type_name("N");
  app.add_option("--shutdown-timeout-s", shutdown_timeout_s,
                 "on SIGTERM, how long open connections may go on")
      ->capture_default_str()
      ->check(packrat::Between(0, 3600))
      ->type_name("SECONDS");
  app.add_option("--port-file", port_file, "write {\"listen\":P} here once listening")
      ->type_name("FILE");
  app.set_version_flag("--version", std::string("packrat-forward ") + PACKRAT_VERSION);
  app.footer("example: packrat-forward --upstream unix:/run/packrat/agent.sock "
             "--listen 127.0.0.1:8080\n"
             "exit codes: 0 after SIGTERM/SIGINT, 1 when start-up fails, 2 on bad usage");
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (std::optional<int> exit =
          packrat::ParseCommandLine(app, args, "packrat-forward", std::cout, std::cerr)) {
    return *exit;
  }
  options.listen = *packrat::ParseEndpoint(listen);
  options.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
  options.threads = threads;
  auto parsed = packrat::ParseUpstream(upstream);
  if (!parsed.ok()) {
    std::cerr << "packrat-forward: --upstream: " << parsed.status().message() << "\n";
    return 2;
  }
  options.upstream = *parsed;
  packrat::SetLogComponent("forward");

  packrat::StopSignals stop_signals;  // before any thread starts

  auto forwarder = packrat::Forwarder::Create(options);
  if (!forwarder.ok()) {
    PACKRAT_LOG(ERROR) << "cannot start: " << forwarder.status().message();
    return 1;
  }
  if (!port_file.empty() && !WritePortFile(port_file, (*forwarder)->port())) {
    PACKRAT_LOG(ERROR) << "cannot write the port file " << port_file;
    return 1;
  }
  (*forwarder)->Start();
  PACKRAT_LOG(INFO) << "listening on " << options.listen.host << ":" << (*forwarder)->port()
                    << ", forwarding to " << options.upstream.ToString() << " (connect timeout "
                    << options.connect_timeout.count() << " ms)";
  const int sig = stop_signals.Wait();
  (*forwarder)->StopAccepting();
  PACKRAT_LOG(INFO) << "received signal " << sig << ": not accepting; "
                    << (*forwarder)->open_connections() << " open connection(s) get up to "
                    << shutdown_timeout_s << " s to end";
  (*forwarder)
      ->Shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(shutdown_timeout_s));
  PACKRAT_LOG(INFO) << "stopped";
  return 0;
}
