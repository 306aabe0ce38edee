// What the agent adds to one inference: direct in-process libtorch (ModelRunner, 1 thread,
// pinned) vs the same model through packrat-agent (HTTP keep-alive, binary tensor extension in
// and out, shared memory, a 1-thread pinned runtime), sequential requests, same input.
//
//   build/bin/overhead_bench [--iterations N] [--models DIR] [--agent PATH] [--model NAME]...
//
// Prints one Markdown table row per ⟨model, batch⟩ with p50/p99 of both and the overhead, then
// where the agent's time goes, per request: the means of the statistics extension's queue,
// compute_input (the copy into the runtime's slab), compute_infer (the runtime's own timing)
// and compute_output (the copy out), and the rest of the end-to-end mean (HTTP read and parse,
// decode, the ring push and the runtime's wake-up, the completion's, encode and write).
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/model_runner.h"
#include "tests/support/agent_process.h"
#include "tests/support/http_client.h"

namespace packrat {
namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  std::string model;  // file stem in the models dir
  std::vector<int64_t> row_shape;
  int64_t out_row;  // elements per output row
  int64_t batch;
};

struct Stats {
  double p50_us = 0, p99_us = 0;
  double http_p50_us = 0;  // GET /v2/health/live on the same connection: the HTTP floor
  // End-to-end minus the runtime's own forward() time for the same request (from the agent's
  // debug log): what the agent adds, free of the model's run-to-run noise.
  double paired_p50_us = 0, paired_p99_us = 0;
  // Means per request (µs), warm-up included: end to end, and the statistics extension's
  // durations.
  double mean_us = 0, queue_us = 0, input_us = 0, infer_us = 0, output_us = 0;
};

// The mean of statistics duration `name` ({"count":C,"ns":N}) in a /stats answer, in µs.
double MeanUs(const std::string& stats, const std::string& name) {
  const std::regex re("\"" + name + "\":\\{\"count\":(\\d+),\"ns\":(\\d+)\\}");
  std::smatch m;
  if (!std::regex_search(stats, m, re) || std::stod(m[1]) == 0) return 0;
  return std::stod(m[2]) / std::stod(m[1]) / 1e3;
}

Stats Summarise(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
  };
  return {at(0.50), at(0.99)};
}

void PinTo(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

int64_t RowElements(const Case& c) {
  int64_t n = 1;
  for (int64_t d : c.row_shape) n *= d;
  return n;
}

Stats Direct(const std::string& dir, const Case& c, const std::vector<float>& input, int iters) {
  runtime::ModelRunnerOptions o;
  o.model_path = dir + "/" + c.model + ".pt";
  o.threads = 1;
  auto runner = runtime::ModelRunner::Create(o);
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<int64_t> shape{c.batch};
  shape.insert(shape.end(), c.row_shape.begin(), c.row_shape.end());
  std::vector<float> in = input;
  runtime::RawTensor t{DataType::kFp32, shape, in.data(), in.size() * 4};
  std::vector<uint8_t> out(c.batch * c.out_row * 4 + 4096);
  std::vector<runtime::RawTensor> outputs;
  std::vector<double> us;
  for (int i = 0; i < iters + iters / 10 + 3; ++i) {
    const auto start = Clock::now();
    if (!(*runner)->Run({t}, out.data(), out.size(), &outputs).ok()) std::exit(1);
    const double d = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= iters / 10 + 3) us.push_back(d);  // warm-up excluded
  }
  return Summarise(us);
}

Stats ThroughAgent(const std::string& agent, const std::string& dir, const Case& c,
                   const std::vector<float>& input, int iters) {
  std::string shape = "[-1";
  for (int64_t d : c.row_shape) shape += ", " + std::to_string(d);
  shape += "]";
  const std::string config =
      "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, io_threads: 1" +
      (std::getenv("PACKRAT_IDLE_SPIN_US")
           ? std::string(", runtime_idle_spin_us: ") + std::getenv("PACKRAT_IDLE_SPIN_US")
           : std::string()) +
      "}\n"
      "models:\n"
      "  - name: m\n"
      "    path: " +
      dir + "/" + c.model +
      ".pt\n"
      "    inputs: [{name: x, datatype: FP32, shape: " +
      shape +
      "}]\n"
      "    outputs: [{name: y, datatype: FP32, shape: [-1, " +
      std::to_string(c.out_row) +
      "]}]\n"
      "    batching: {max_batch: 64, max_delay_us: 0}\n"
      "    instances: [{count: 1, threads: 1, batch: " +
      std::to_string(c.batch) + "}]\n";
  testing::AgentProcess process(agent, config);
  if (!process.WaitUntilServing()) {
    std::fprintf(stderr, "agent did not start:\n%s", process.Log().c_str());
    std::exit(1);
  }
  std::string json =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[" + std::to_string(c.batch);
  for (int64_t d : c.row_shape) json += "," + std::to_string(d);
  json += "],\"parameters\":{\"binary_data_size\":" + std::to_string(input.size() * 4) +
          "}}],\"parameters\":{\"binary_data_output\":true}}";
  std::string body = json;
  body.append(reinterpret_cast<const char*>(input.data()), input.size() * 4);
  const std::map<std::string, std::string> headers{
      {"Inference-Header-Content-Length", std::to_string(json.size())},
      {"Content-Type", "application/octet-stream"}};
  testing::HttpClient client("127.0.0.1", process.http_port());
  std::vector<double> http_us;
  for (int i = 0; i < 1000; ++i) {
    const auto start = Clock::now();
    client.Get("/v2/health/live");
    http_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::vector<double> us;
  double all_sum = 0;  // every inference, warm-up included, as the statistics count them
  int all_count = 0;
  for (int i = 0; i < iters + iters / 10 + 3; ++i) {
    const auto start = Clock::now();
    const auto r = client.Post("/v2/models/m/infer", body, headers);
    const double d = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (r.status != 200) {
      std::fprintf(stderr, "request failed: %d %s\n", r.status, r.body.c_str());
      std::exit(1);
    }
    all_sum += d;
    ++all_count;
    if (i >= iters / 10 + 3) us.push_back(d);
  }
  const std::string stats_json = client.Get("/v2/models/m/stats").body;
  process.Stop(SIGTERM);
  Stats stats = Summarise(us);
  stats.mean_us = all_sum / all_count;
  stats.queue_us = MeanUs(stats_json, "queue");
  stats.input_us = MeanUs(stats_json, "compute_input");
  stats.infer_us = MeanUs(stats_json, "compute_infer");
  stats.output_us = MeanUs(stats_json, "compute_output");
  stats.http_p50_us = Summarise(http_us).p50_us;
  // "m/0: batch of N row(s) computed in X us", one line per request, in order.
  std::vector<double> compute_us;
  std::istringstream log(process.Log());
  for (std::string line; std::getline(log, line);) {
    const size_t at = line.find(" computed in ");
    if (at != std::string::npos) compute_us.push_back(std::stod(line.substr(at + 13)));
  }
  if (compute_us.size() >= us.size()) {
    std::vector<double> paired;
    const size_t skip = compute_us.size() - us.size();
    for (size_t i = 0; i < us.size(); ++i) paired.push_back(us[i] - compute_us[skip + i]);
    const Stats p = Summarise(paired);
    stats.paired_p50_us = p.p50_us;
    stats.paired_p99_us = p.p99_us;
  }
  return stats;
}

int Main(int argc, char** argv) {
  int iters = 1000;
  std::string dir = PACKRAT_MODELS_DIR;
  std::string agent = PACKRAT_AGENT_PATH;
  std::vector<std::string> only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--iterations") iters = std::atoi(argv[i + 1]);
    if (flag == "--models") dir = argv[i + 1];
    if (flag == "--agent") agent = argv[i + 1];
    if (flag == "--model") only.push_back(argv[i + 1]);
  }
  const std::vector<Case> cases = {
      {"tiny_mlp", {16}, 8, 1},
      {"tiny_mlp", {16}, 8, 8},
      {"resnet18", {3, 224, 224}, 1000, 1},  // a 600 KB input (scripts/make_models.py)
      {"resnet50", {3, 224, 224}, 1000, 1},
      {"resnet50", {3, 224, 224}, 1000, 8},
  };
  std::vector<std::pair<Case, Stats>> breakdown;
  std::printf(
      "| model | batch | direct p50 | direct p99 | agent p50 | agent p99 | difference p50 |"
      " agent overhead p50 (paired) | p99 (paired) | HTTP GET p50 |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.model) == only.end()) continue;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    std::vector<float> input(c.batch * RowElements(c));
    for (float& f : input) f = normal(rng);
    const int n = c.model.starts_with("resnet") ? std::max(20, iters / 20) : iters;
    // The agent pins its only runtime to the first core; the direct run gets the same core.
    cpu_set_t all;
    sched_getaffinity(0, sizeof(all), &all);
    int first = 0;
    while (!CPU_ISSET(first, &all)) ++first;
    PinTo(first);
    const Stats direct = Direct(dir, c, input, n);
    sched_setaffinity(0, sizeof(all), &all);
    const Stats via = ThroughAgent(agent, dir, c, input, n);
    auto fmt = [](double us) {
      char buf[32];
      if (us >= 10000) {
        std::snprintf(buf, sizeof(buf), "%.1f ms", us / 1000);
      } else {
        std::snprintf(buf, sizeof(buf), "%.0f µs", us);
      }
      return std::string(buf);
    };
    std::printf(
        "| %s | %lld | %s | %s | %s | %s | %+.0f µs (%+.1f%%) | %.0f µs | %.0f µs |"
        " %.0f µs |\n",
        c.model.c_str(), static_cast<long long>(c.batch), fmt(direct.p50_us).c_str(),
        fmt(direct.p99_us).c_str(), fmt(via.p50_us).c_str(), fmt(via.p99_us).c_str(),
        via.p50_us - direct.p50_us, 100.0 * (via.p50_us - direct.p50_us) / direct.p50_us,
        via.paired_p50_us, via.paired_p99_us, via.http_p50_us);
    std::fflush(stdout);
    breakdown.emplace_back(c, via);
  }
  std::printf(
      "\n| model | batch | end-to-end mean | queue | copy in | compute | copy out | the rest |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& [c, s] : breakdown) {
    std::printf("| %s | %lld | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs |\n",
                c.model.c_str(), static_cast<long long>(c.batch), s.mean_us, s.queue_us, s.input_us,
                s.infer_us, s.output_us,
                s.mean_us - s.queue_us - s.input_us - s.infer_us - s.output_us);
  }
  return 0;
}

}  // namespace
}  // namespace packrat

int main(int argc, char** argv) { return packrat::Main(argc, argv); }
