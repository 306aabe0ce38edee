// Times batches of B rows through a running agent: one request of B rows at a time (binary
// tensor extension), `iterations` times after `warmup`, and prints "p50_ms mean_ms min_ms",
// followed with `--samples 1` by every timed request's latency (ms) in the order sent.
// Used by bench/plan_vs_fat.sh and bench/run to measure a plan's real batch latency.
//
//   batch_latency --port P --model M --input NAME:DTYPE:d1,d2,... --batch B
//                 [--iterations 10] [--warmup 2] [--samples 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/datatype.h"
#include "tests/support/http_client.h"

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  const int port = std::atoi(flags["--port"].c_str());
  const std::string model = flags["--model"];
  const int batch = std::atoi(flags["--batch"].c_str());
  const int iterations =
      flags.count("--iterations") ? std::atoi(flags["--iterations"].c_str()) : 10;
  const int warmup = flags.count("--warmup") ? std::atoi(flags["--warmup"].c_str()) : 2;
  // NAME:DTYPE:d1,d2,...
  const std::string spec = flags["--input"];
  const size_t c1 = spec.find(':'), c2 = spec.find(':', c1 + 1);
  if (port <= 0 || model.empty() || batch < 1 || c1 == std::string::npos ||
      c2 == std::string::npos) {
    std::fprintf(stderr,
                 "usage: batch_latency --port P --model M --input NAME:DTYPE:d1,d2 "
                 "--batch B [--iterations N] [--warmup N] [--samples 1]\n");
    return 2;
  }
  const std::string name = spec.substr(0, c1);
  const std::string dtype = spec.substr(c1 + 1, c2 - c1 - 1);
  const auto type = packrat::DataTypeFromName(dtype);
  if (!type) return 2;
  std::string shape = std::to_string(batch);
  size_t elements = static_cast<size_t>(batch);
  for (size_t pos = c2 + 1; pos <= spec.size();) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const long d = std::atol(spec.substr(pos, comma - pos).c_str());
    shape += "," + std::to_string(d);
    elements *= static_cast<size_t>(d);
    pos = comma + 1;
  }
  std::string data(elements * packrat::DataTypeSize(*type), '\0');
  if (*type == packrat::DataType::kFp32) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < elements; ++i) {
      const float f = normal(rng);
      std::memcpy(&data[4 * i], &f, 4);
    }
  } else if (*type == packrat::DataType::kInt64) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int64_t> token(0, 30000);
    for (size_t i = 0; i < elements; ++i) {
      const int64_t v = token(rng);
      std::memcpy(&data[8 * i], &v, 8);
    }
  }
  const std::string header =
      "{\"inputs\":[{\"name\":\"" + name + "\",\"datatype\":\"" + dtype + "\",\"shape\":[" + shape +
      "],\"parameters\":{\"binary_data_size\":" + std::to_string(data.size()) +
      "}}],\"parameters\":{\"binary_data_output\":true}}";
  const std::map<std::string, std::string> headers{
      {"Inference-Header-Content-Length", std::to_string(header.size())},
      {"Content-Type", "application/octet-stream"}};
  packrat::testing::HttpClient client("127.0.0.1", static_cast<uint16_t>(port));
  std::vector<double> ms;
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = client.Post("/v2/models/" + model + "/infer", header + data, headers);
    const double d =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r.status != 200) {
      std::fprintf(stderr, "request failed: %d %s %s\n", r.status, r.body.c_str(), r.error.c_str());
      return 1;
    }
    if (i >= warmup) ms.push_back(d);
  }
  const std::vector<double> in_order = ms;
  std::sort(ms.begin(), ms.end());
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
  std::printf("%.3f %.3f %.3f", ms[ms.size() / 2], mean, ms.front());
  if (flags["--samples"] == "1") {
    for (const double d : in_order) std::printf(" %.3f", d);
  }
  std::printf("\n");
  return 0;
}
