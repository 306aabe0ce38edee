#include "agent/cli/capacity_command.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/planning/batching_simulator.h"
#include "agent/cli/command.h"
#include "agent/cli/flags.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/plan_evaluator.h"
#include "agent/planning/profile.h"

namespace packrat {
namespace {

constexpr FlagSpec kCapacityFlags[] = {
    {"profile", "FILE", "latency profile CSV: threads,batch,latency_ms[,...] (required)"},
    {"threads", "T", "threads (cores) to plan for; default: the profile's largest thread count"},
    {"batch", "B", "batch size B (required); repeat it or give a list: --batch 1,8,64"},
    {"p99-ms", "MS", "the p99 latency target, arrival to answer (required)"},
    {"max-delay-us", "US", "the longest a row waits for its batch to fill (default 2000)"},
    {"requests", "N", "simulated arrivals per rate (default 20000, at least 100)"},
    {"json", "", "print one JSON object per line instead of a table"},
    {"help", "", "print this help"},
};

std::string CapacityUsage() {
  return "usage: packrat capacity --profile FILE [--threads T] --batch B[,B...] --p99-ms MS\n"
         "                        [--max-delay-us US] [--requests N] [--json]\n"
         "\n"
         "Simulates, for each batch size B, the highest rate of single-row requests that one fat\n"
         "instance <1,T,B>, one instance per core and the optimizer's plan serve within the p99\n"
         "target, batched as the agent batches them, at the profile's latencies. A projection:\n"
         "the profile times instances alone, and plan switches are not simulated.\n"
         "\n"
         "flags:\n" +
         FlagsHelp(kCapacityFlags);
}

struct PeerResult {
  const char* peer;
  std::vector<InstanceGroup> groups;
  std::optional<double> batch_ms;    // the slowest group's full-slice latency
  std::optional<double> rows_per_s;  // nullopt: the profile lacks a group's thread count

  std::string Config() const {
    Plan plan;
    plan.groups = groups;
    return plan.ConfigString();
  }
};

// bench/run's "one instance per core" plan for B rows on T cores.
std::vector<InstanceGroup> PerCoreGroups(int threads, int batch) {
  const int per = std::max(1, (batch + threads - 1) / threads);
  const int count = std::min(threads, (batch + per - 1) / per);
  return {{count, 1, per}};
}

PeerResult Simulate(const char* peer, std::vector<InstanceGroup> groups, int batch,
                    const PlanEvaluator& evaluator, double p99_ms) {
  PeerResult result{peer, std::move(groups), std::nullopt, std::nullopt};
  double slowest = 0;
  for (const InstanceGroup& g : result.groups) {
    const std::optional<double> latency = evaluator.profile().InterpolatedLatency(g.threads, g.batch);
    if (!latency.has_value()) return result;
    slowest = std::max(slowest, *latency);
  }
  result.batch_ms = slowest;
  result.rows_per_s = evaluator.MaxRate(result.groups, batch, p99_ms);
  return result;
}

std::string ToJson(int threads, int batch, int p99_ms, const std::vector<PeerResult>& peers) {
  std::string out = "{\"threads\":" + std::to_string(threads) +
                    ",\"batch\":" + std::to_string(batch) +
                    ",\"p99_target_ms\":" + std::to_string(p99_ms) + ",\"peers\":[";
  for (size_t i = 0; i < peers.size(); ++i) {
    const PeerResult& p = peers[i];
    if (i > 0) out += ',';
    out.append("{\"peer\":\"").append(p.peer).append("\",\"config\":\"").append(p.Config());
    out.append("\",\"batch_ms\":").append(p.batch_ms ? FormatFixed(*p.batch_ms, 3) : "null");
    out.append(",\"rows_per_s\":").append(p.rows_per_s ? FormatFixed(*p.rows_per_s, 2) : "null");
    out.append("}");
  }
  return out + "]}";
}

}  // namespace

int RunCapacityCommand(std::span<const std::string_view> args, std::ostream& out,
                       std::ostream& err) {
  StatusOr<ParsedFlags> flags = ParseFlags(kCapacityFlags, args);
  if (!flags.ok()) return UsageError(err, flags.status(), "capacity");
  if (flags->Has("help")) {
    out << CapacityUsage();
    return kExitOk;
  }
  if (!flags->positional().empty()) {
    return UsageError(
        err,
        InvalidArgument("unexpected argument '" + std::string(flags->positional().front()) + "'"),
        "capacity");
  }
  if (Status s = RequireFlags(*flags, {"profile", "batch", "p99-ms"}); !s.ok()) {
    return UsageError(err, s, "capacity");
  }
  StatusOr<std::vector<int>> batches = ParseIntListFlag("batch", flags->GetAll("batch"), 1);
  if (!batches.ok()) return UsageError(err, batches.status(), "capacity");
  // An integer flag's value, or `fallback` where it is not given.
  const auto int_flag = [&](const char* name, int min, int fallback) -> StatusOr<int> {
    std::optional<std::string_view> value = flags->Get(name);
    return value.has_value() ? ParseIntFlag(name, *value, min) : StatusOr<int>(fallback);
  };
  StatusOr<int> threads_flag = int_flag("threads", 1, 0);  // 0: the profile's largest
  StatusOr<int> p99_ms = int_flag("p99-ms", 1, 0);
  StatusOr<int> max_delay_us = int_flag("max-delay-us", 0, 2000);
  StatusOr<int> requests = int_flag("requests", 100, 20000);
  for (const StatusOr<int>* parsed : {&threads_flag, &p99_ms, &max_delay_us, &requests}) {
    if (!parsed->ok()) return UsageError(err, parsed->status(), "capacity");
  }

  StatusOr<Profile> loaded = Profile::LoadCsv(std::string(*flags->Get("profile")));
  if (!loaded.ok()) return CommandFailure(err, loaded.status());
  const int threads = *threads_flag > 0 ? *threads_flag : loaded->MaxThreads();
  const Optimizer optimizer(*std::move(loaded));
  const BatchingSimulator simulator(*requests);
  PlanEvaluatorOptions options;
  options.max_delay = std::chrono::microseconds(*max_delay_us);
  const PlanEvaluator evaluator(optimizer, simulator, options);  // the profile's latencies

  std::vector<std::vector<PeerResult>> rows;
  for (int batch : *batches) {
    StatusOr<Plan> plan = optimizer.Solve(threads, batch);
    if (!plan.ok()) return CommandFailure(err, plan.status());
    rows.push_back(
        {Simulate("fat", {{1, threads, batch}}, batch, evaluator, *p99_ms),
         Simulate("per_core", PerCoreGroups(threads, batch), batch, evaluator, *p99_ms),
         Simulate("packrat", plan->groups, batch, evaluator, *p99_ms)});
  }

  if (flags->Has("json")) {
    for (size_t i = 0; i < rows.size(); ++i) {
      out << ToJson(threads, (*batches)[i], *p99_ms, rows[i]) << "\n";
    }
  } else {
    out << "threads: " << threads << "; p99 target: " << *p99_ms
        << " ms; rows/s within it (simulated on the profile)\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      for (const PeerResult& p : rows[i]) {
        out << "B=" << (*batches)[i] << "  " << p.peer << "  " << p.Config() << "  "
            << (p.rows_per_s ? FormatFixed(*p.rows_per_s, 2) + " rows/s" : "not in the profile")
            << "\n";
      }
    }
  }
  return out ? kExitOk : kExitError;
}

}  // namespace packrat
