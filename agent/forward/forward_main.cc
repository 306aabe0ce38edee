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
#include <string>

#include "agent/forward/forwarder.h"
#include "common/atomic_file.h"
#include "common/logging.h"
#include "common/stop_signals.h"

namespace {

int Usage() {
  std::cerr << "usage: packrat-forward --upstream unix:PATH|tcp:HOST:PORT"
               " [--listen HOST:PORT] [--connect-timeout-ms N]\n"
               "                       [--threads N] [--shutdown-timeout-s N] [--port-file FILE]\n";
  return 2;
}

// Parses a whole decimal number in [min, max].
bool ParseInt(const std::string& text, long min, long max, long* out) {
  char* end = nullptr;
  *out = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && *end == '\0' && *out >= min && *out <= max;
}

bool WritePortFile(const std::string& path, uint16_t port) {
  return packrat::WriteFileAtomically(path, "{\"listen\":" + std::to_string(port) + "}\n").ok();
}

}  // namespace

int main(int argc, char** argv) {
  packrat::ForwarderOptions options;
  std::string upstream, port_file;
  long shutdown_timeout_s = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return Usage(), 0;
    if (i + 1 >= argc) return Usage();
    const std::string value = argv[++i];
    long n = 0;
    if (flag == "--upstream") {
      upstream = value;
    } else if (flag == "--listen") {
      auto endpoint = packrat::ParseEndpoint(value);
      if (!endpoint.ok()) {
        std::cerr << "packrat-forward: --listen: " << endpoint.status().message() << "\n";
        return 2;
      }
      options.listen = *endpoint;
    } else if (flag == "--connect-timeout-ms" && ParseInt(value, 1, 3600000, &n)) {
      options.connect_timeout = std::chrono::milliseconds(n);
    } else if (flag == "--threads" && ParseInt(value, 1, 64, &n)) {
      options.threads = static_cast<int>(n);
    } else if (flag == "--shutdown-timeout-s" && ParseInt(value, 0, 3600, &n)) {
      shutdown_timeout_s = n;
    } else if (flag == "--port-file") {
      port_file = value;
    } else {
      std::cerr << "packrat-forward: bad flag or value: " << flag << " " << value << "\n";
      return Usage();
    }
  }
  if (upstream.empty()) return Usage();
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
