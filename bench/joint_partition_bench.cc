// How long JointPartition::Solve takes to share a node's CPUs among M models: T = 32, 64, 128
// CPUs with M = 2, 4, 8, 16 models, cycling through the four published 16-core profiles
// (data/profiles). A profile has t ≤ 16, so on more CPUs every plan is the optimizer's
// multi-instance extension of it (several instances of ≤ 16 threads), as in the optimizer
// bench's T = 128 cases. Each model has its own Optimizer (no plan shared between models),
// batching.max_batch 64, no target (the costlier case: each model's reference is its best with
// all T CPUs, so every envelope is scanned to T), and a load of about a third of its share of
// the node: rate = per-CPU rate of its profile × T/M × a factor of 0.6-1.4 by model index.
//
//   joint_partition_bench [--reps N] [--requests N] [--max-cpus T]
//
// --requests: JointPartitionOptions::simulated_requests (default: its default).
//
// Per ⟨T,M⟩: one cold solve (fresh JointPartition and Optimizers: every plan computed), then
// N warm solves (default 20), each after every rate moved by a deterministic ±3% step, so every
// simulation runs again as on successive decisions. Prints the cold time and the median and p99
// (nearest rank) of the warm wall times in ms, the median of their thread CPU times (the VM is
// shared), and the simulations per solve; single-threaded
// (docs/benchmarks.md, "Joint partition solve time").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "agent/planning/joint_partition.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/profile.h"

#ifndef PACKRAT_PROFILES_DIR
#define PACKRAT_PROFILES_DIR "data/profiles"
#endif

namespace packrat {
namespace {

using Clock = std::chrono::steady_clock;

struct Published {
  const char* name;
  double rows_per_cpu;  // about a third of what one CPU serves at small batches
};
constexpr Published kProfiles[] = {
    {"resnet50", 6}, {"inception-v3", 6}, {"bert-base", 3}, {"gpt2", 2}};

Profile Load(const char* name) {
  StatusOr<Profile> p =
      Profile::LoadCsv(std::string(PACKRAT_PROFILES_DIR) + "/" + name + "-xeon6142-16c.csv");
  if (!p.ok()) {
    std::fprintf(stderr, "error: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(p);
}

double Ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time of this thread, ms: what the solve itself costs on a VM shared with other work.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The q-quantile of `v` by nearest rank.
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

PartitionResult SolveOrDie(JointPartition& partition, const std::vector<ModelDemand>& models,
                           int cpus) {
  StatusOr<PartitionResult> r = partition.Solve(models, cpus);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(r);
}

int Main(int argc, char** argv) {
  int reps = 20;
  int requests = JointPartitionOptions{}.simulated_requests;
  int max_cpus = 128;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--reps") && has_value) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--requests") && has_value) {
      requests = std::max(100, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--max-cpus") && has_value) {
      max_cpus = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--requests N] [--max-cpus T]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Profile> profiles;
  for (const Published& p : kProfiles) profiles.push_back(Load(p.name));
  std::printf("p99 estimates from %d simulated requests; %d warm reps\n\n", requests, reps);
  std::printf("%5s %3s %10s %10s %10s %12s %12s %8s\n", "T", "M", "cold_ms", "median_ms", "p99_ms",
              "cpu_med_ms", "sims/solve", "spare");
  for (int cpus : {32, 64, 128}) {
    if (cpus > max_cpus) break;
    for (int count : {2, 4, 8, 16}) {
      std::vector<std::unique_ptr<Optimizer>> optimizers;
      std::vector<ModelDemand> models;
      for (int i = 0; i < count; ++i) {
        const size_t k = static_cast<size_t>(i) % profiles.size();
        optimizers.push_back(std::make_unique<Optimizer>(profiles[k]));
        ModelDemand d;
        d.name = std::string(kProfiles[k].name) + "-" + std::to_string(i);
        d.optimizer = optimizers.back().get();
        d.rate = kProfiles[k].rows_per_cpu * cpus / count * (0.6 + 0.2 * (i % 5));
        d.max_batch = 64;
        models.push_back(std::move(d));
      }
      JointPartitionOptions options;
      options.simulated_requests = requests;
      JointPartition partition(options);
      Clock::time_point start = Clock::now();
      PartitionResult r = SolveOrDie(partition, models, cpus);
      const double cold = Ms(start);
      std::vector<double> warm, cpu;
      int64_t sims = 0;
      for (int rep = 0; rep < reps; ++rep) {
        for (size_t i = 0; i < models.size(); ++i) {
          models[i].rate *= 1 + 0.03 * (((rep + static_cast<int>(i)) % 3) - 1);
        }
        const double cpu_start = ThreadCpuMs();
        start = Clock::now();
        r = SolveOrDie(partition, models, cpus);
        warm.push_back(Ms(start));
        cpu.push_back(ThreadCpuMs() - cpu_start);
        sims += r.stats.simulations;
      }
      std::printf("%5d %3d %10.1f %10.1f %10.1f %12.1f %12.1f %8d\n", cpus, count, cold,
                  Quantile(warm, 0.5), Quantile(warm, 0.99), Quantile(cpu, 0.5),
                  static_cast<double>(sims) / reps, r.spare_cpus);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace packrat

int main(int argc, char** argv) { return packrat::Main(argc, argv); }
