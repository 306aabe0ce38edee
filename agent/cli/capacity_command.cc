#include "agent/cli/capacity_command.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/cli/command.h"
#include "agent/planning/batching_simulator.h"
#include "agent/planning/optimizer.h"
#include "agent/planning/plan_evaluator.h"
#include "agent/planning/profile.h"
#include "common/command_line.h"

namespace packrat {
namespace {

struct PeerResult {
  const char* peer;
  std::vector<InstanceGroup> groups;
  std::optional<double> batch_ms;    // the slowest group's full-slice latency
  std::optional<double> rows_per_s;  // nullopt: the profile lacks a group's point, or (no
                                     // groups) the optimizer found no plan of its points

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
    const std::optional<double> latency =
        evaluator.profile().InterpolatedLatency(g.threads, g.batch);
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
  CLI::App app(
      "Simulates, for each batch size B, the highest rate of single-row requests that one fat "
      "instance <1,T,B>, one instance per core and the optimizer's plan serve within the p99 "
      "target, batched as the agent batches them, at the profile's latencies. A projection: the "
      "profile times instances alone, and plan switches are not simulated.",
      "packrat capacity");
  std::string profile_path;
  std::vector<int> batches;
  int threads_flag = 0;  // 0: the profile's largest
  int p99_ms = 0;
  int max_delay_us = 2000;
  int requests = 20000;
  bool json = false;
  app.add_option("--profile", profile_path, "latency profile CSV: threads,batch,latency_ms[,...]")
      ->required()
      ->type_name("FILE");
  app.add_option("--batch", batches, "batch size B; repeat it or give a list: --batch 1,8,64")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(AtLeast(1))
      ->type_name("B");
  app.add_option("--p99-ms", p99_ms, "the p99 latency target, arrival to answer")
      ->required()
      ->check(AtLeast(1))
      ->type_name("MS");
  app.add_option("--threads", threads_flag,
                 "threads (cores) to plan for [default: the profile's largest thread count]")
      ->check(AtLeast(1))
      ->type_name("T");
  app.add_option("--max-delay-us", max_delay_us, "the longest a row waits for its batch to fill")
      ->capture_default_str()
      ->check(AtLeast(0))
      ->type_name("US");
  app.add_option("--requests", requests, "simulated arrivals per rate")
      ->capture_default_str()
      ->check(AtLeast(100))
      ->type_name("N");
  app.add_flag("--json", json, "print one JSON object per line instead of a table");
  app.footer(
      "example: packrat capacity --profile data/profiles/resnet50-xeon6142-16c.csv "
      "--batch 8,32 --p99-ms 1000");
  if (std::optional<int> exit = ParseCommandLine(app, args, "packrat capacity", out, err)) {
    return *exit;
  }

  StatusOr<Profile> loaded = Profile::LoadCsv(profile_path);
  if (!loaded.ok()) return CommandFailure(err, loaded.status());
  const int threads = threads_flag > 0 ? threads_flag : loaded->MaxThreads();
  const Optimizer optimizer(*std::move(loaded));
  const BatchingSimulator simulator(requests);
  PlanEvaluatorOptions options;
  options.max_delay = std::chrono::microseconds(max_delay_us);
  const PlanEvaluator evaluator(optimizer, simulator, options);  // the profile's latencies

  // A batch size the profile's points cannot make a plan of (a sparse or shipped profile) has
  // no optimizer's row; the command fails only if no batch size has one.
  std::vector<std::vector<PeerResult>> rows;
  Status no_plan;
  bool planned = false;
  for (int batch : batches) {
    StatusOr<Plan> plan = optimizer.Solve(threads, batch);
    if (!plan.ok() && no_plan.ok()) no_plan = plan.status();
    planned = planned || plan.ok();
    rows.push_back({Simulate("fat", {{1, threads, batch}}, batch, evaluator, p99_ms),
                    Simulate("per_core", PerCoreGroups(threads, batch), batch, evaluator, p99_ms),
                    plan.ok() ? Simulate("packrat", plan->groups, batch, evaluator, p99_ms)
                              : PeerResult{"packrat", {}, std::nullopt, std::nullopt}});
  }
  if (!planned) return CommandFailure(err, no_plan);

  if (json) {
    for (size_t i = 0; i < rows.size(); ++i) {
      out << ToJson(threads, batches[i], p99_ms, rows[i]) << "\n";
    }
  } else {
    out << "threads: " << threads << "; p99 target: " << p99_ms
        << " ms; rows/s within it (simulated on the profile)\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      for (const PeerResult& p : rows[i]) {
        out << "B=" << batches[i] << "  " << p.peer << "  " << p.Config() << "  "
            << (p.rows_per_s       ? FormatFixed(*p.rows_per_s, 2) + " rows/s"
                : p.groups.empty() ? "no plan of the profile's points"
                                   : "not in the profile")
            << "\n";
      }
    }
  }
  return out ? kExitOk : kExitError;
}

}  // namespace packrat
