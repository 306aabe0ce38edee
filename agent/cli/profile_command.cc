#include "agent/cli/profile_command.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "agent/cli/command.h"
#include "agent/cli/flags.h"
#include "agent/config/config.h"
#include "agent/pool/cpu_topology.h"
#include "agent/profiling/profile_store.h"

namespace packrat {
namespace {

constexpr FlagSpec kProfileFlags[] = {
    {"config", "FILE.yaml", "agent config that declares the model"},
    {"model", "NAME", "the model to profile"},
    {"threads", "LIST", "thread counts, e.g. 1-4 or 1,2,4 (default: 1..usable cores)"},
    {"batches", "LIST", "batch sizes (default: powers of two up to batching.max_batch or 32)"},
    {"out", "FILE.csv", "where to write the profile (resumed if it exists with the same key)"},
    {"runtime", "PATH", "packrat-runtime (default: next to this binary)"},
    {"target-error", "FRACTION", "stop timing a point when the 95% interval is within this"},
    {"max-seconds-per-point", "SECONDS", "time limit per point (default 20)"},
    {"alone", "", "time each instance alone, not next to busy neighbours on the other cores"},
    {"help", "", "print this help"},
};

std::string Usage() {
  return "usage: packrat profile --config FILE.yaml --model NAME --out FILE.csv [flags]\n\n" +
         FlagsHelp(kProfileFlags);
}

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
  auto flags = ParseFlags(kProfileFlags, args);
  if (!flags.ok()) return UsageError(err, flags.status(), "profile");
  if (flags->Has("help")) {
    out << Usage();
    return kExitOk;
  }
  if (Status s = RequireFlags(*flags, {"config", "model", "out"}); !s.ok()) {
    return UsageError(err, s, "profile");
  }
  auto config = LoadConfig(std::string(*flags->Get("config")));
  if (!config.ok()) {
    err << "error: " << config.status().message() << "\n";
    return kExitError;
  }
  const std::string model_name(*flags->Get("model"));
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
  options.model.kernel = ResolveKernelSettings(model->optimize, ReadCpuFeatures(), model->inputs);
  err << "kernel settings: " << options.model.kernel.Key() << "\n";
  options.cores = AffinityCpus();
  options.runtime_path =
      flags->Get("runtime") ? std::string(*flags->Get("runtime")) : DefaultRuntime();
  if (auto v = flags->Get("threads")) {
    auto threads = ParseIntRanges(std::string(*v));
    if (!threads.ok()) return UsageError(err, threads.status(), "profile");
    options.threads = *threads;
  } else {
    for (size_t t = 1; t <= options.cores.size(); ++t)
      options.threads.push_back(static_cast<int>(t));
  }
  if (auto v = flags->Get("batches")) {
    auto batches = ParseIntRanges(std::string(*v));
    if (!batches.ok()) return UsageError(err, batches.status(), "profile");
    options.batches = *batches;
  } else {
    options.batches = PowersOfTwoUpTo(
        model->batching.max_batch > 0 ? static_cast<int>(model->batching.max_batch) : 32);
  }
  if (auto v = flags->Get("target-error")) {
    options.target_rel_error = std::atof(std::string(*v).c_str());
    if (!(options.target_rel_error > 0 && options.target_rel_error < 1)) {
      return UsageError(err, InvalidArgument("--target-error must be in (0, 1)"), "profile");
    }
  }
  if (auto v = flags->Get("max-seconds-per-point")) {
    auto s = ParseIntFlag("max-seconds-per-point", *v, 1);
    if (!s.ok()) return UsageError(err, s.status(), "profile");
    options.max_seconds_per_point = std::chrono::seconds(*s);
  }

  const std::string path(*flags->Get("out"));
  options.neighbours = !flags->Has("alone");
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
