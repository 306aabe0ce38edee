// What the packrat-forward sidecar adds to one request: sequential inference requests on one
// keep-alive connection, straight to the agent over TCP against the same requests through a
// packrat-forward process (upstream: the agent's Unix socket, and its TCP port), and straight to
// the agent's Unix socket. Tiny model (tiny_mlp: x FP32 [1,16] -> y FP32 [1,8], binary tensor
// extension both ways), one runtime with 1 thread and batch 1, max_delay_us 0.
//
//   build/bin/forward_bench [--iterations N] [--rounds R]
//
// The paths take turns in R rounds of N/R requests each (after a warm-up), so that a change in
// background load affects them alike. Prints a Markdown table.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tests/agent/metrics/child_process.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"

namespace packrat {
namespace {

using Clock = std::chrono::steady_clock;
using metrics::testing::ChildProcess;

double Percentile(std::vector<double> us, double q) {
  std::sort(us.begin(), us.end());
  return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
}

// Starts packrat-forward on 127.0.0.1:0 and returns its port (exits on failure).
uint16_t StartForwarder(const std::string& upstream, std::unique_ptr<ChildProcess>* out) {
  std::string error;
  *out = ChildProcess::Start(
      {PACKRAT_FORWARD_PATH, "--listen", "127.0.0.1:0", "--upstream", upstream}, &error);
  if (!*out) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  const auto line =
      (*out)->WaitForLine([](std::string_view l) { return l.find("listening on") != l.npos; },
                          std::chrono::seconds(30));
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex(R"(listening on [^ ]+:(\d+),)"))) {
    std::fprintf(stderr, "packrat-forward did not start:\n%s", (*out)->Output().c_str());
    std::exit(1);
  }
  return static_cast<uint16_t>(std::stoi(m[1]));
}

int Main(int argc, char** argv) {
  int iterations = 2000;
  int rounds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--iterations") iterations = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  rounds = std::max(1, std::min(rounds, iterations));

  char tmpl[] = "/tmp/packrat-fwd-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  const std::string socket = dir + "/agent.sock";
  const std::string config =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0,\n"
      "         io_threads: 1, unix_socket: " +
      socket +
      "}\n"
      "models:\n"
      "  - name: m\n"
      "    path: " PACKRAT_MODELS_DIR
      "/tiny_mlp.pt\n"
      "    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
      "    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
      "    batching: {max_batch: 64, max_delay_us: 0}\n"
      "    instances: [{count: 1, threads: 1, batch: 1}]\n";
  testing::AgentProcess agent(PACKRAT_AGENT_PATH, config);
  if (!agent.WaitUntilServing()) {
    std::fprintf(stderr, "agent did not start:\n%s", agent.Log().c_str());
    return 1;
  }
  std::unique_ptr<ChildProcess> via_unix_process, via_tcp_process;
  const uint16_t via_unix_port = StartForwarder("unix:" + socket, &via_unix_process);
  const uint16_t via_tcp_port =
      StartForwarder("tcp:127.0.0.1:" + std::to_string(agent.http_port()), &via_tcp_process);

  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> input(16);
  for (float& f : input) f = normal(rng);
  const std::string json =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],"
      "\"parameters\":{\"binary_data_size\":64}}],\"parameters\":{\"binary_data_output\":true}}";
  std::string body = json;
  body.append(reinterpret_cast<const char*>(input.data()), input.size() * 4);
  const std::map<std::string, std::string> headers{
      {"Inference-Header-Content-Length", std::to_string(json.size())},
      {"Content-Type", "application/octet-stream"}};

  struct Path {
    std::string name;
    std::unique_ptr<testing::HttpClient> client;
    std::vector<double> us;
  };
  std::vector<Path> paths;
  auto add = [&](std::string name, std::unique_ptr<testing::HttpClient> client) {
    paths.push_back({std::move(name), std::move(client), {}});
  };
  add("direct, TCP", std::make_unique<testing::HttpClient>("127.0.0.1", agent.http_port()));
  add("packrat-forward → Unix socket",
      std::make_unique<testing::HttpClient>("127.0.0.1", via_unix_port));
  add("packrat-forward → TCP", std::make_unique<testing::HttpClient>("127.0.0.1", via_tcp_port));
  add("direct, Unix socket (no forwarder)",
      std::make_unique<testing::HttpClient>(testing::UnixSocket{socket}));

  const int per_round = iterations / rounds;
  for (int round = -1; round < rounds; ++round) {  // round -1: warm-up, not recorded
    for (Path& path : paths) {
      for (int i = 0; i < (round < 0 ? 200 : per_round); ++i) {
        const auto start = Clock::now();
        const auto r = path.client->Post("/v2/models/m/infer", body, headers);
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        if (r.status != 200) {
          std::fprintf(stderr, "%s: request failed: %d %s %s\n", path.name.c_str(), r.status,
                       r.body.c_str(), r.error.c_str());
          return 1;
        }
        if (round >= 0) path.us.push_back(us);
      }
    }
  }

  const double direct_p50 = Percentile(paths[0].us, 0.50);
  const double direct_p99 = Percentile(paths[0].us, 0.99);
  std::printf(
      "| path | requests | p50 | p99 | p50 vs direct TCP | p99 vs direct TCP |\n"
      "|---|---:|---:|---:|---:|---:|\n");
  for (const Path& path : paths) {
    const double p50 = Percentile(path.us, 0.50);
    const double p99 = Percentile(path.us, 0.99);
    std::printf("| %s | %zu | %.0f µs | %.0f µs | %+.0f µs | %+.0f µs |\n", path.name.c_str(),
                path.us.size(), p50, p99, p50 - direct_p50, p99 - direct_p99);
  }
  paths.clear();  // close the connections, so the forwarders exit at once
  via_unix_process->Stop(SIGTERM);
  via_tcp_process->Stop(SIGTERM);
  agent.Stop(SIGTERM);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace packrat

int main(int argc, char** argv) { return packrat::Main(argc, argv); }
