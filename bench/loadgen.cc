// An open-loop load generator for loopback benchmarks: requests arrive on a schedule of rates
// (constant spacing or Poisson), independent of how fast the server answers, and every
// request's latency is recorded from its *scheduled* arrival, so a slow server cannot hide
// queueing in the client (no coordinated omission).
//
//   loadgen --port P --target /v2/models/m/infer --body FILE [--body FILE]... [--header K:V]...
//           --schedule RATE:SECONDS[,RATE:SECONDS...] [--arrivals poisson|constant]
//           [--max-requests N] [--connections N] [--seed S] --out FILE.csv
//
// Each request sends one of the --body files, drawn uniformly (with the arrivals' seed): requests
// of several sizes, such as rows per request. The run is bounded in time (the schedule) and,
// with --max-requests, in count.
//
// Output: one CSV line per request, "start_s,latency_ms,status", start_s counted from the
// first arrival; and on stdout the wall-clock time (UTC seconds since midnight, like the
// agent's log stamps) of that first arrival, then p50/p90/p99 per schedule step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Step {
  double rate;     // requests per second
  double seconds;  // duration
};

struct Record {
  double start_s = 0;
  double latency_ms = 0;
  int status = 0;
};

int Usage(const char* why) {
  std::cerr << "loadgen: " << why
            << "\nusage: loadgen --port P --target PATH --body FILE [--header K:V]... "
               "--schedule RATE:SECONDS[,...] [--arrivals poisson|constant] [--max-requests N] "
               "[--connections N] [--seed S] --out FILE.csv\n";
  return 2;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::string target, out_file, arrivals = "poisson";
  std::vector<std::string> body_files;
  std::vector<Step> schedule;
  std::map<std::string, std::string> headers;
  int connections = 64;
  unsigned seed = 1;
  size_t max_requests = 0;  // 0 = only the schedule bounds the run
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--port") {
      port = std::atoi(next().c_str());
    } else if (a == "--target") {
      target = next();
    } else if (a == "--body") {
      body_files.push_back(next());
    } else if (a == "--out") {
      out_file = next();
    } else if (a == "--arrivals") {
      arrivals = next();
    } else if (a == "--max-requests") {
      max_requests = static_cast<size_t>(std::atoll(next().c_str()));
    } else if (a == "--connections") {
      connections = std::atoi(next().c_str());
    } else if (a == "--seed") {
      seed = static_cast<unsigned>(std::atoi(next().c_str()));
    } else if (a == "--header") {
      const std::string h = next();
      const size_t colon = h.find(':');
      if (colon == std::string::npos) return Usage("--header needs K:V");
      headers[h.substr(0, colon)] = h.substr(colon + 1);
    } else if (a == "--schedule") {
      std::stringstream in(next());
      std::string item;
      while (std::getline(in, item, ',')) {
        Step s{};
        if (std::sscanf(item.c_str(), "%lf:%lf", &s.rate, &s.seconds) != 2 || s.rate <= 0 ||
            s.seconds <= 0) {
          return Usage("bad --schedule step");
        }
        schedule.push_back(s);
      }
    } else {
      return Usage(("unknown flag " + a).c_str());
    }
  }
  if (port <= 0 || target.empty() || body_files.empty() || out_file.empty() || schedule.empty() ||
      connections < 1 || (arrivals != "poisson" && arrivals != "constant")) {
    return Usage("missing or bad flags");
  }
  std::vector<std::string> bodies;
  for (const std::string& file : body_files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Usage(("cannot read --body " + file).c_str());
    bodies.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Every arrival time, fixed in advance.
  std::mt19937_64 rng(seed);
  std::vector<double> arrivals_s;
  std::vector<size_t> step_of;
  std::vector<size_t> body_of;
  std::uniform_int_distribution<size_t> pick(0, bodies.size() - 1);
  double t0 = 0;
  for (size_t k = 0; k < schedule.size(); ++k) {
    std::exponential_distribution<double> gap(schedule[k].rate);
    double t = t0;
    while (true) {
      t += arrivals == "poisson" ? gap(rng) : 1.0 / schedule[k].rate;
      if (t >= t0 + schedule[k].seconds) break;
      if (max_requests > 0 && arrivals_s.size() >= max_requests) break;
      arrivals_s.push_back(t);
      step_of.push_back(k);
      body_of.push_back(bodies.size() > 1 ? pick(rng) : 0);
    }
    t0 += schedule[k].seconds;
  }

  std::vector<Record> records(arrivals_s.size());
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> due;  // arrivals whose time has come, waiting for a connection
  bool done = false;
  std::vector<std::thread> workers;
  Clock::time_point start;
  for (int c = 0; c < connections; ++c) {
    workers.emplace_back([&] {
      packrat::testing::HttpClient client("127.0.0.1", static_cast<uint16_t>(port));
      while (true) {
        size_t i;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !due.empty(); });
          if (due.empty()) return;
          i = due.front();
          due.pop_front();
        }
        const packrat::testing::HttpResult r = client.Post(target, bodies[body_of[i]], headers);
        const auto end = Clock::now();
        const double scheduled = arrivals_s[i];
        records[i].start_s = scheduled;
        records[i].latency_ms =
            std::chrono::duration<double, std::milli>(end - start).count() - scheduled * 1e3;
        records[i].status = r.status;
      }
    });
  }
  const auto wall = std::chrono::system_clock::now();
  start = Clock::now();
  const auto since_midnight =
      std::chrono::duration<double>(wall.time_since_epoch()).count() -
      86400.0 * std::floor(std::chrono::duration<double>(wall.time_since_epoch()).count() / 86400);
  std::printf("start_utc_seconds_of_day %.6f\n", since_midnight);
  std::fflush(stdout);
  for (size_t i = 0; i < arrivals_s.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals_s[i])));
    {
      std::lock_guard<std::mutex> lock(mu);
      due.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& w : workers) w.join();

  std::ofstream out(out_file);
  out << "start_s,latency_ms,status\n";
  std::vector<std::vector<double>> by_step(schedule.size());
  size_t errors = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    out << records[i].start_s << ',' << records[i].latency_ms << ',' << records[i].status << '\n';
    if (records[i].status == 200) {
      by_step[step_of[i]].push_back(records[i].latency_ms);
    } else {
      ++errors;
    }
  }
  for (size_t k = 0; k < schedule.size(); ++k) {
    std::printf("step %zu: %.1f req/s for %.0f s: %zu ok, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms\n",
                k, schedule[k].rate, schedule[k].seconds, by_step[k].size(),
                Percentile(by_step[k], 0.5), Percentile(by_step[k], 0.9),
                Percentile(by_step[k], 0.99));
  }
  std::printf("errors %zu of %zu\n", errors, records.size());
  return errors == 0 ? 0 : 1;
}
