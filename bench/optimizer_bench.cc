// Optimizer benchmark: how long the ⟨i,t,b⟩ DP takes, cold (a fresh Optimizer, so no cached
// plan) and warm (a cache hit).
//
//   optimizer_bench [PROFILE.csv]     default: data/profiles/resnet50-xeon6142-16c.csv
//
// Cases: Solve(128,1024) and SolveAll(16,1024) on the measured profile (threads 1..16), plus
// Solve(128,1024) on a synthetic profile that has every thread count 1..128 (11 batch sizes,
// 1408 points): the worst case for a 128-core machine profiled at every thread count. Each case
// prints min / median / max wall time over its repetitions; single-threaded.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/planning/optimizer.h"
#include "agent/planning/profile.h"

#ifndef PACKRAT_PROFILES_DIR
#define PACKRAT_PROFILES_DIR "data/profiles"
#endif

namespace packrat {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `setup` (untimed) then `body` (timed) `reps` times and prints the distribution.
void Measure(const char* name, int reps, const std::function<void()>& setup,
             const std::function<void()>& body) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    setup();
    Clock::time_point start = Clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-44s %5d %10.4f %10.4f %10.4f\n", name, reps, ms.front(), ms[ms.size() / 2],
              ms.back());
}

// Amdahl-style latencies: 5% of the work is serial, plus a fixed 2 ms per batch.
Profile SyntheticProfile(int max_threads) {
  Profile profile;
  for (int t = 1; t <= max_threads; ++t) {
    for (int b = 1; b <= 1024; b *= 2) {
      ProfilePoint p;
      p.threads = t;
      p.batch = b;
      p.latency_ms = 2.0 + 10.0 * b * (0.05 + 0.95 / t) * (1.0 + 0.01 * std::log2(t));
      if (!profile.Add(p).ok()) std::abort();
    }
  }
  return profile;
}

void Check(const Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

int Main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : std::string(PACKRAT_PROFILES_DIR) + "/resnet50-xeon6142-16c.csv";
  StatusOr<Profile> measured = Profile::LoadCsv(path);
  Check(measured.status());
  const Profile synthetic = SyntheticProfile(128);
  std::printf("profile: %s (%zu points); synthetic: %zu points\n\n", path.c_str(), measured->size(),
              synthetic.size());
  std::printf("%-44s %5s %10s %10s %10s\n", "case", "reps", "min_ms", "median_ms", "max_ms");

  std::unique_ptr<Optimizer> optimizer;
  auto fresh = [&](const Profile& p) {
    return [&] { optimizer = std::make_unique<Optimizer>(p); };
  };
  auto solve = [&](int t, int b) { return [&, t, b] { Check(optimizer->Solve(t, b).status()); }; };
  auto solve_all = [&](int t, int b) {
    return [&, t, b] { Check(optimizer->SolveAll(t, b).status()); };
  };

  Measure("Solve(16,64) cold", 50, fresh(*measured), solve(16, 64));
  Measure("Solve(16,1024) cold", 50, fresh(*measured), solve(16, 1024));
  Measure("Solve(128,1024) cold", 20, fresh(*measured), solve(128, 1024));
  Measure("SolveAll(16,1024) cold", 20, fresh(*measured), solve_all(16, 1024));
  Measure("SolveAll(128,1024) cold", 5, fresh(*measured), solve_all(128, 1024));
  optimizer = std::make_unique<Optimizer>(*measured);
  Check(optimizer->Solve(128, 1024).status());
  Measure(
      "Solve(128,1024) warm (cache hit)", 1000, [] {}, solve(128, 1024));
  Measure("Solve(128,1024) cold, synthetic 1..128 thr", 5, fresh(synthetic), solve(128, 1024));
  Measure("SolveAll(128,1024) cold, synthetic", 3, fresh(synthetic), solve_all(128, 1024));

  optimizer = std::make_unique<Optimizer>(*measured);
  StatusOr<Plan> plan = optimizer->Solve(128, 1024);
  Check(plan.status());
  std::printf("\nSolve(128,1024) on the measured profile: %s, %.3f ms\n",
              plan->ConfigString().c_str(), plan->latency_ms);
  optimizer = std::make_unique<Optimizer>(synthetic);
  plan = optimizer->Solve(128, 1024);
  Check(plan.status());
  std::printf("Solve(128,1024) on the synthetic profile: %s, %.3f ms\n",
              plan->ConfigString().c_str(), plan->latency_ms);
  return 0;
}

}  // namespace
}  // namespace packrat

int main(int argc, char** argv) { return packrat::Main(argc, argv); }
