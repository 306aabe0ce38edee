// A load generator for generative models: N greedy generate requests with widely varying output
// lengths (max_tokens drawn uniformly from [min, max], seeded), `concurrency` of them in flight at
// a time (default: all at once, a burst), over loopback. Reports tokens per second over the
// whole run and per-request latency; writes one CSV line per request.
//
//   generate_load --port P [--model gpt] [--requests 48] [--prompt-tokens 16]
//                 [--min-tokens 8] [--max-tokens 200] [--vocab 50257] [--concurrency N]
//                 [--seed 1] [--out FILE.csv]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  int max_tokens = 0;
  int tokens = 0;  // output ids received
  double latency_ms = 0;
  int status = 0;
};

int CountIds(const std::string& body) {
  const size_t open = body.find("\"output_ids\":[");
  if (open == std::string::npos) return 0;
  const size_t close = body.find(']', open);
  const std::string list = body.substr(open + 14, close - open - 14);
  return list.empty() ? 0 : static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0, requests = 48, prompt_tokens = 16, min_tokens = 8, max_tokens = 200;
  int vocab = 50257, concurrency = 0;
  unsigned seed = 1;
  std::string model = "gpt", out_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--port")
      port = std::atoi(value.c_str());
    else if (flag == "--model")
      model = value;
    else if (flag == "--requests")
      requests = std::atoi(value.c_str());
    else if (flag == "--prompt-tokens")
      prompt_tokens = std::atoi(value.c_str());
    else if (flag == "--min-tokens")
      min_tokens = std::atoi(value.c_str());
    else if (flag == "--max-tokens")
      max_tokens = std::atoi(value.c_str());
    else if (flag == "--vocab")
      vocab = std::atoi(value.c_str());
    else if (flag == "--concurrency")
      concurrency = std::atoi(value.c_str());
    else if (flag == "--seed")
      seed = static_cast<unsigned>(std::atoi(value.c_str()));
    else if (flag == "--out")
      out_file = value;
    else {
      std::fprintf(stderr, "generate_load: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (port <= 0 || requests < 1 || min_tokens < 1 || max_tokens < min_tokens) {
    std::fprintf(stderr,
                 "usage: generate_load --port P [--requests N] [--min-tokens a] "
                 "[--max-tokens b] ...\n");
    return 2;
  }
  if (concurrency <= 0) concurrency = requests;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(min_tokens, max_tokens), token(0, vocab - 1);
  std::vector<std::string> bodies(requests);
  std::vector<Result> results(requests);
  for (int r = 0; r < requests; ++r) {
    results[r].max_tokens = length(rng);
    std::string ids;
    for (int t = 0; t < prompt_tokens; ++t) {
      if (t) ids += ',';
      ids += std::to_string(token(rng));
    }
    bodies[r] = "{\"input_ids\":[" + ids +
                "],\"parameters\":{\"max_tokens\":" + std::to_string(results[r].max_tokens) + "}}";
  }
  std::mutex mu;
  int next = 0;
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int c = 0; c < concurrency; ++c) {
    workers.emplace_back([&] {
      packrat::testing::HttpClient client("127.0.0.1", static_cast<uint16_t>(port));
      while (true) {
        int r;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next == requests) return;
          r = next++;
        }
        const auto t0 = Clock::now();
        const auto answer = client.Post("/v2/models/" + model + "/generate", bodies[r]);
        results[r].latency_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        results[r].status = answer.status;
        results[r].tokens = answer.status == 200 ? CountIds(answer.body) : 0;
      }
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t tokens = 0, errors = 0;
  std::vector<double> latency;
  for (const Result& r : results) {
    tokens += r.tokens;
    errors += r.status != 200 || r.tokens != r.max_tokens;
    latency.push_back(r.latency_ms);
  }
  if (!out_file.empty()) {
    std::ofstream out(out_file);
    out << "max_tokens,tokens,latency_ms,status\n";
    for (const Result& r : results) {
      out << r.max_tokens << ',' << r.tokens << ',' << r.latency_ms << ',' << r.status << '\n';
    }
  }
  double mean = 0;
  for (double l : latency) mean += l / static_cast<double>(latency.size());
  std::printf(
      "requests %d tokens %lld seconds %.2f tokens_per_s %.1f latency_mean_ms %.0f "
      "p50_ms %.0f p99_ms %.0f errors %lld\n",
      requests, static_cast<long long>(tokens), seconds, static_cast<double>(tokens) / seconds,
      mean, Percentile(latency, 0.5), Percentile(latency, 0.99), static_cast<long long>(errors));
  return errors == 0 ? 0 : 1;
}
