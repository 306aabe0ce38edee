// packrat-emulated-runtime: an emulated thin model instance, for a virtual node
// (server.virtual_cpus) or any model with `emulate:`. Launched by packrat-agent in place of
// packrat-runtime, it speaks the same shared-memory protocol but links no libtorch and computes
// nothing: loading takes `--load-s` seconds of one CPU, warm-up and every slice of b rows at t
// threads last the profile's L[t,b] at the speed the node's contention allows (emulator/), and
// the answers are zero-filled outputs of the declared shapes.
//
//   packrat-emulated-runtime --segment NAME --emulate PROFILE.csv --threads T [--cores 0,1]
//                   [--node NODE] [--load-s 1.5] [--neighbour-slowdown 0.13]
//                   [--profile-error 0.2] [--jitter-cv 0.3] [--seed 7]
//                   [--output FP32:1000]... [--warmup-batch 4]... [--warmup-iterations 3]
//                   [--agent-pid PID] [--name demo/0] [--idle-spin-us 100] [--idle-start-s 3]
//                   [--warmup always|while-idle]
//   and, accepted for the real runtime's command line and ignored: --model, --input,
//   --output-type, --precision, --memory-format, --freeze, --accuracy-*.
//
// --emulate is the profile the runtime lasts (the model's truth, which may differ from the one
// the agent plans on); --profile-error scales each of its points by a factor fixed by --seed,
// --jitter-cv each slice by a random one (emulator/latency_truth.h).
//
// --cores names the CPUs of the node (virtual ones on a virtual node): it is never pinned to
// them. --node names the node's shared state (shm/virtual_cpus.h); without it there is no
// contention.
//
// Exit codes: 0 orderly shutdown, 1 start-up failure (also recorded in the segment), 2 usage.

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/logging.h"
#include "emulator/emulated_cpus.h"
#include "emulator/emulated_model.h"
#include "emulator/emulated_worker.h"
#include "emulator/latency_truth.h"
#include "runtime/runtime_flags.h"
#include "runtime/runtime_lifecycle.h"
#include "shm/segment.h"
#include "shm/virtual_cpus.h"

namespace packrat::emulator {
namespace {

struct Flags {
  runtime::CommonFlags common;  // --segment, --name, --threads, --cores, --warmup-*, ...
  std::string profile;
  std::string node;
  std::vector<OutputSpec> outputs;
  double load_s = 0;
  double neighbour_slowdown = 0;
  double profile_error = 0;
  double jitter_cv = 0;
  uint64_t seed = 0;
  std::string kernel = "fp32";  // the settings the real runtime would report
  bool bf16 = false, channels_last = false, freeze = false;
};

StatusOr<double> ParseNumber(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0)) return InvalidArgument("bad " + flag + " " + text);
  return v;
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--freeze") {
      f.freeze = true;
      continue;
    }
    if (flag == "--accuracy-strict") continue;
    if (i + 1 >= argc) return InvalidArgument("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    ASSIGN_OR_RETURN(const bool common, runtime::ParseCommonFlag(flag, value, &f.common));
    if (common) continue;
    if (flag == "--emulate") {
      f.profile = value;
    } else if (flag == "--node") {
      f.node = value;
    } else if (flag == "--output") {  // DTYPE:d1,d2,...  (row shape; may be empty)
      OutputSpec spec;
      RETURN_IF_ERROR(runtime::ParseRowSpec(flag, value, &spec.datatype, &spec.row_shape));
      f.outputs.push_back(std::move(spec));
    } else if (flag == "--load-s") {
      ASSIGN_OR_RETURN(f.load_s, ParseNumber(flag, value));
    } else if (flag == "--neighbour-slowdown") {
      ASSIGN_OR_RETURN(f.neighbour_slowdown, ParseNumber(flag, value));
    } else if (flag == "--profile-error") {
      ASSIGN_OR_RETURN(f.profile_error, ParseNumber(flag, value));
      if (f.profile_error >= 1) return InvalidArgument("--profile-error must be below 1");
    } else if (flag == "--jitter-cv") {
      ASSIGN_OR_RETURN(f.jitter_cv, ParseNumber(flag, value));
    } else if (flag == "--seed") {
      char* end = nullptr;
      f.seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') return InvalidArgument("bad --seed " + value);
    } else if (flag == "--precision") {
      f.bf16 = value == "bf16";
    } else if (flag == "--memory-format") {
      f.channels_last = value == "channels_last";
    } else if (flag == "--model" || flag == "--input" || flag == "--output-type" ||
               flag == "--accuracy-samples" || flag == "--accuracy-max-rel-error" ||
               flag == "--accuracy-min-top1") {
      // The real runtime's; nothing to emulate.
    } else {
      return InvalidArgument("unknown flag " + flag);
    }
  }
  if (f.common.segment.empty() || f.profile.empty()) {
    return InvalidArgument("--segment and --emulate are required");
  }
  if (f.common.threads < 1) return InvalidArgument("--threads must be >= 1");
  f.kernel = std::string(f.bf16 ? "bf16" : "fp32") + (f.channels_last ? "+cl" : "") +
             (f.freeze ? "+frozen" : "");
  return f;
}

// The load report's start_priority (RuntimeInstance::start_priority): "" where no idle start
// was asked for.
std::string StartPriorityItem(double idle_start_s, SteadyTime idle_until, bool starved) {
  if (idle_start_s <= 0) return "";
  if (starved) return " start_priority=idle-until-starved";
  return std::chrono::steady_clock::now() < idle_until ? " start_priority=idle"
                                                       : " start_priority=idle-until-limit";
}

std::string FormatSeconds(std::chrono::nanoseconds ns) {
  return std::to_string(static_cast<double>(ns.count()) / 1e9);
}

int Main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::cout << "packrat-emulated-runtime (no libtorch)\n";
    return 0;
  }
  auto flags_or = ParseFlags(argc, argv);
  if (!flags_or.ok()) {
    std::cerr << "packrat-emulated-runtime: " << flags_or.status().message() << "\n";
    return 2;
  }
  const Flags& flags = *flags_or;
  SetLogComponent("emulated[" + flags.common.name + "]");
  // --idle-start-s: load and warm up at idle priority (common/idle_priority.h) until then, as
  // the real runtime does where it may (emulated: always).
  const SteadyTime idle_until =
      std::chrono::steady_clock::now() +
      std::chrono::nanoseconds(static_cast<int64_t>(flags.common.idle_start_s * 1e9));
  auto segment_or = runtime::AttachToAgent(flags.common.segment, flags.common.agent_pid);
  if (!segment_or.ok()) {
    PACKRAT_LOG(ERROR) << segment_or.status().ToString();
    return 1;
  }
  std::unique_ptr<shm::Segment> segment = std::move(segment_or).value();
  auto fail = [&segment](const Status& s) { return runtime::FailStart(segment.get(), s); };
  auto profile = Profile::LoadCsv(flags.profile);
  if (!profile.ok()) return fail(profile.status());
  auto model = EmulatedModel::Create(PerturbedProfile(*profile, flags.profile_error, flags.seed),
                                     flags.common.threads, flags.outputs);
  if (!model.ok()) return fail(model.status());
  std::unique_ptr<shm::VirtualCpus> node;
  if (!flags.node.empty()) {
    auto node_or = shm::VirtualCpus::Open(flags.node);
    if (!node_or.ok()) return fail(node_or.status());
    node = std::move(node_or).value();
  }
  EmulatedCpusOptions cpu_options;
  cpu_options.neighbour_slowdown = flags.neighbour_slowdown;
  auto cpus_or = EmulatedCpus::Create(std::move(node), cpu_options);
  if (!cpus_or.ok()) return fail(cpus_or.status());
  std::unique_ptr<EmulatedCpus> cpus = std::move(cpus_or).value();

  EmulatedWorkerOptions worker_options;
  worker_options.agent_pid = flags.common.agent_pid;
  worker_options.idle_spin = std::chrono::microseconds(std::max(0, flags.common.idle_spin_us));
  worker_options.cpus = flags.common.cores;
  worker_options.jitter_cv = flags.jitter_cv;
  // Each runtime draws its own slices' jitter: the seed and its pid.
  worker_options.jitter_seed = flags.seed ^ (static_cast<uint64_t>(getpid()) << 32);
  EmulatedWorker worker(segment.get(), &*model, cpus.get(), worker_options);
  auto alive = [&worker] { return worker.AgentAlive(); };

  // Loading the model: single-threaded work, on the CPU of its set the kernel would run a
  // waking thread on — an idle one where the set has one (the least busy: the fastest now).
  // (On the first CPU, a shadow runtime placed partly on free CPUs and partly on a busy
  // runtime's loaded beside that runtime and slowed it, which a real one need not do.)
  const auto load = std::chrono::nanoseconds(static_cast<int64_t>(flags.load_s * 1e9));
  std::vector<int> loading;
  uint32_t least = UINT32_MAX;
  for (int cpu : flags.common.cores) {
    // Busy threads of others on it (RateNow cannot tell a free CPU from one with a single busy
    // thread: it counts the caller's own, not marked yet).
    const uint32_t busy = cpus->node() ? cpus->node()->busy(cpu) : 0;
    if (busy < least) {
      least = busy;
      loading = {cpu};
    }
  }
  auto loaded = cpus->Compute(load, loading, alive, idle_until);
  if (!loaded.ok()) return fail(loaded.status());
  if (!*loaded) return 1;
  // Warm-up: the forward passes the real runtime makes, at the profile's latencies (with
  // --warmup while-idle only while still at idle priority, as the real runtime).
  auto idle_now = [&] {
    return flags.common.idle_start_s > 0 && !cpus->idle_starved() &&
           std::chrono::steady_clock::now() < idle_until;
  };
  bool warmed = true;
  for (int64_t b : flags.common.warmup_batches) {
    for (int i = 0; warmed && i < flags.common.warmup_iterations; ++i) {
      warmed = !flags.common.warmup_while_idle || idle_now();
      if (!warmed) break;
      auto done = cpus->Compute(model->Latency(b), flags.common.cores, alive, idle_until);
      if (!done.ok()) return fail(done.status());
      if (!*done) return 1;
    }
  }
  segment->SetInfo("kernel=" + flags.kernel +
                   " checked=0 fallback=0 emulated=1 load_s=" + std::to_string(flags.load_s) +
                   " neighbour_slowdown=" + std::to_string(flags.neighbour_slowdown) +
                   " profile_error=" + std::to_string(flags.profile_error) +
                   " jitter_cv=" + std::to_string(flags.jitter_cv) +
                   StartPriorityItem(flags.common.idle_start_s, idle_until, cpus->idle_starved()) +
                   (warmed ? "" : " warmed=0"));
  PACKRAT_LOG(INFO) << "ready: emulating " << flags.profile << " at " << flags.common.threads
                    << " thread(s) on " << flags.common.cores.size() << " CPU(s) (L[t,1] "
                    << FormatSeconds(model->Latency(1)) << " s)"
                    << (cpus->node() ? ", node " + flags.node : std::string(", no node"));
  return runtime::ServeUntilStopped(segment.get(), [&worker] { return worker.Run(); });
}

}  // namespace
}  // namespace packrat::emulator

int main(int argc, char** argv) { return packrat::emulator::Main(argc, argv); }
