#include "agent/cli/profile_command.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "agent/cli/command.h"
#include "agent/config/config.h"
#include "agent/pool/cpu_topology.h"
#include "agent/profiling/profile_store.h"
#include "common/command_line.h"

namespace packrat {
namespace {

std::string DefaultRuntime() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "packrat-runtime" : (self.parent_path() / "packrat-runtime").string();
}

std::string Duration(double s) {
  char buf[32];
  if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  }
  return buf;
}

}  // namespace

int RunProfileCommand(std::span<const std::string_view> args, std::ostream& out,
                      std::ostream& err) {
  CLI::App app(
      "Measures a model's latency profile L[t,b] with real runtimes pinned to the usable cores, "
      "each point next to busy neighbours on the other cores (--alone: by itself). Resumable: "
      "an existing --out file with the same key keeps its points.",
      "packrat profile");
  std::string config_path, model_name, path, runtime, threads_text, batches_text;
  double target_error = 0;
  int max_seconds = 0;
  bool alone = false;
  app.add_option("--config", config_path, "agent config that declares the model")
      ->required()
      ->type_name("FILE.yaml");
  app.add_option("--model", model_name, "the model to profile")->required()->type_name("NAME");
  app.add_option("--out", path,
                 "where to write the profile (resumed if it exists with the same key)")
      ->required()
      ->type_name("FILE.csv");
  app.add_option("--threads", threads_text,
                 "thread counts, e.g. 1-4 or 1,2,4 [default: 1..the usable cores]")
      ->type_name("LIST");
  app.add_option("--batches", batches_text,
                 "batch sizes [default: powers of two up to batching.max_batch, or 32]")
      ->type_name("LIST");
  app.add_option("--runtime", runtime, "packrat-runtime [default: next to this binary]")
      ->type_name("PATH");
  app.add_option("--target-error", target_error,
                 "stop timing a point once its 95% interval is within this fraction of the mean")
      ->check(CLI::Range(0.0, 1.0))
      ->type_name("FRACTION");
  app.add_option("--max-seconds-per-point", max_seconds, "time limit per point [default: 20]")
      ->check(AtLeast(1))
      ->type_name("SECONDS");
  app.add_flag("--alone", alone,
               "time each instance alone, not next to busy neighbours on the other cores");
  app.footer(
      "example: packrat profile --config deploy/config/packrat.yaml --model demo "
      "--out demo.csv --threads 1-4");
  if (std::optional<int> exit = ParseCommandLine(app, args, "packrat profile", out, err)) {
    return *exit;
  }
  auto config = LoadConfig(config_path);
  if (!config.ok()) {
    err << "error: " << config.status().message() << "\n";
    return kExitError;
  }
  const ModelConfig* model = nullptr;
  for (const ModelConfig& m : config->models) {
    if (m.name == model_name) model = &m;
  }
  if (model == nullptr) {
    err << "error: model '" << model_name << "' is not in " << config->source << "\n";
    return kExitError;
  }

  ProfilerOptions options;
  options.model = *model;
  StatusOr<KernelSettings> kernel =
      ResolveKernelSettings(model->optimize, ReadCpuFeatures(), model->inputs);
  if (!kernel.ok()) {
    err << "error: model '" << model_name << "': " << kernel.status().message() << "\n";
    return kExitError;
  }
  options.model.kernel = *kernel;
  err << "kernel settings: " << options.model.kernel.Key() << "\n";
  options.cores = AffinityCpus();
  options.runtime_path = runtime.empty() ? DefaultRuntime() : runtime;
  if (!threads_text.empty()) {
    auto threads = ParseIntRanges(threads_text);
    if (!threads.ok()) return UsageError(err, threads.status(), "profile");
    options.threads = *threads;
  } else {
    for (size_t t = 1; t <= options.cores.size(); ++t)
      options.threads.push_back(static_cast<int>(t));
  }
  if (!batches_text.empty()) {
    auto batches = ParseIntRanges(batches_text);
    if (!batches.ok()) return UsageError(err, batches.status(), "profile");
    options.batches = *batches;
  } else {
    options.batches = PowersOfTwoUpTo(
        model->batching.max_batch > 0 ? static_cast<int>(model->batching.max_batch) : 32);
  }
  if (target_error > 0) {
    if (target_error >= 1) {
      return UsageError(err, InvalidArgument("--target-error must be in (0, 1)"), "profile");
    }
    options.target_rel_error = target_error;
  }
  if (max_seconds > 0) options.max_seconds_per_point = std::chrono::seconds(max_seconds);
  options.neighbours = !alone;
  auto key = ComputeProfileKey(model->path, options.runtime_path, options.model.kernel.Key(),
                               ProfileLoad(options));
  if (!key.ok()) {
    err << "error: " << key.status().message() << "\n";
    return kExitError;
  }
  bool resumed = false;
  auto profile = LoadProfileIfCurrent(path, *key, &resumed);
  if (!profile.ok()) {
    err << "error: " << profile.status().message() << "\n";
    return kExitError;
  }
  err << "profiling '" << model_name << "' (" << key->ToString() << ")"
      << (resumed ? ", resuming " + path : "") << "\n";

  const bool tty = isatty(STDERR_FILENO) && &err == &std::cerr;
  ForkExecLauncher launcher;
  Profiler profiler(options, &launcher);
  Status s = profiler.Run(
      &*profile, [&](const Profile& p) { return SaveProfile(path, *key, p); },
      [&](const ProfileProgress& p) {
        char line[200];
        std::snprintf(line, sizeof(line), "<t=%d,b=%d> %.3f ms ±%.1f%% (%d it)", p.threads, p.batch,
                      p.latency_ms, 100 * p.rel_error, p.iterations);
        if (tty) {
          constexpr int kWidth = 30;
          const int filled = p.total ? kWidth * p.done / p.total : kWidth;
          err << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] "
              << p.done << "/" << p.total << " " << line << " ETA " << Duration(p.eta_s) << "   "
              << std::flush;
        } else {
          err << p.done << "/" << p.total << " " << line << " elapsed " << Duration(p.elapsed_s)
              << " ETA " << Duration(p.eta_s) << "\n";
        }
      });
  if (tty) err << "\n";
  if (!s.ok()) {
    err << "error: " << s.message() << "\n";
    return kExitError;
  }
  if (Status saved = SaveProfile(path, *key, *profile); !saved.ok()) {
    err << "error: " << saved.message() << "\n";
    return kExitError;
  }
  out << "wrote " << path << " (" << profile->size() << " points)\n";
  return kExitOk;
}

}  // namespace packrat
