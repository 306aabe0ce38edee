#include "agent/cli/plan_command.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "agent/cli/command.h"
#include "agent/planning/profile.h"
#include "common/command_line.h"

namespace packrat {
namespace {

// Shortest decimal form that reads back as the same double (latencies print as profiled).
std::string FormatShortest(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

// Renders rows as aligned columns: column 1 (config) left-aligned, the others right-aligned.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      std::string pad(width[c] - row[c].size(), ' ');
      line += c == 1 ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string PlanTable(const std::string& profile_path, const Profile& profile, int threads,
                      const std::vector<Plan>& plans) {
  std::vector<int> batches = profile.Batches();
  std::string out = "profile: " + profile_path + " (" + std::to_string(profile.size()) +
                    " points, threads " + std::to_string(profile.points().front().threads) + ".." +
                    std::to_string(profile.MaxThreads()) + ", batch sizes " +
                    std::to_string(batches.front()) + ".." + std::to_string(batches.back()) + ")\n";
  out += "threads: " + std::to_string(threads) +
         "; config <i,t,b> = i instances, each with t threads and b rows\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"B", "config", "instances", "threads_used", "latency_ms", "fat_latency_ms", "speedup"}};
  for (const Plan& p : plans) {
    rows.push_back({std::to_string(p.batch), p.ConfigString(), std::to_string(p.InstanceCount()),
                    std::to_string(p.ThreadsUsed()), FormatFixed(p.latency_ms, 3),
                    p.fat_latency_ms ? FormatFixed(*p.fat_latency_ms, 3) : "-",
                    p.fat_latency_ms ? FormatFixed(p.ExpectedSpeedup(), 2) + "x" : "-"});
  }
  return out + RenderTable(rows);
}

}  // namespace

std::string PlanToJson(const Plan& plan) {
  std::string out = "{\"threads\":" + std::to_string(plan.threads_total) +
                    ",\"batch\":" + std::to_string(plan.batch) +
                    ",\"latency_ms\":" + FormatShortest(plan.latency_ms) + ",\"fat_latency_ms\":";
  if (plan.fat_latency_ms.has_value()) {
    // The speedup is rounded to two decimals; the latencies are exact for consumers that need
    // more.
    out += FormatShortest(*plan.fat_latency_ms) + ",\"expected_speedup\":" +
           FormatShortest(std::round(plan.ExpectedSpeedup() * 100) / 100);
  } else {
    out += "null,\"expected_speedup\":null";
  }
  out += ",\"instances\":[";
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const InstanceGroup& g = plan.groups[i];
    if (i > 0) out += ',';
    out += "{\"count\":" + std::to_string(g.count) + ",\"threads\":" + std::to_string(g.threads) +
           ",\"batch\":" + std::to_string(g.batch) + "}";
  }
  return out + "]}";
}

int RunPlanCommand(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  CLI::App app(
      "Chooses, for each batch size B, the <instances,threads,batch> configuration that minimises "
      "the batch latency predicted from the profile on T threads, and compares it with one fat "
      "instance that runs all B rows on all T threads.",
      "packrat plan");
  std::string profile_path;
  std::vector<int> batches;
  std::optional<int> threads;
  bool json = false;
  app.add_option("--profile", profile_path,
                 "latency profile CSV: threads,batch,latency_ms[,...]")
      ->required()
      ->type_name("FILE");
  app.add_option("--batch", batches,
                 "batch size B to plan; repeat it or give a list: --batch 1,8,64")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(AtLeast(1))
      ->type_name("B");
  app.add_option("--threads", threads,
                 "threads (cores) to plan for [default: the profile's largest thread count]")
      ->check(AtLeast(1))
      ->type_name("T");
  app.add_flag("--json", json, "print one JSON object per line instead of a table");
  app.footer("example: packrat plan --profile data/profiles/resnet50-xeon6142-16c.csv --threads 16 "
             "--batch 1,8,64");
  if (std::optional<int> exit = ParseCommandLine(app, args, "packrat plan", out, err)) {
    return *exit;
  }

  const std::string& path = profile_path;
  StatusOr<Profile> profile = Profile::LoadCsv(path);
  if (!profile.ok()) return CommandFailure(err, profile.status());
  if (!threads.has_value()) threads = profile->MaxThreads();

  const Optimizer optimizer(*std::move(profile));
  std::vector<Plan> plans;
  for (int batch : batches) {
    StatusOr<Plan> plan = optimizer.Solve(*threads, batch);
    if (!plan.ok()) return CommandFailure(err, plan.status());
    plans.push_back(*std::move(plan));
  }

  if (json) {
    for (const Plan& plan : plans) out << PlanToJson(plan) << "\n";
  } else {
    out << PlanTable(path, optimizer.profile(), *threads, plans);
  }
  return out ? kExitOk : kExitError;
}

}  // namespace packrat
