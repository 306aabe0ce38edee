#include "agent/metrics/process_metrics.h"

#include <prometheus/client_metric.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <utility>

namespace packrat::metrics {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

// Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses, so
// the split starts after the last ')'); element 0 is field 3 of proc(5), `state`.
std::vector<std::string> StatFieldsAfterComm(const std::string& stat) {
  std::vector<std::string> fields;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return fields;
  std::istringstream in(stat.substr(paren + 1));
  std::string field;
  while (in >> field) fields.push_back(field);
  return fields;
}

// proc(5) field number -> index into StatFieldsAfterComm.
constexpr size_t StatIndex(int field) { return static_cast<size_t>(field - 3); }

std::optional<double> BootTimeSeconds(const std::string& proc_root) {
  const std::optional<std::string> stat = ReadFile(proc_root + "/stat");
  if (!stat) return std::nullopt;
  std::istringstream in(*stat);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("btime ")) return ParseNumber(line.substr(6));
  }
  return std::nullopt;
}

std::optional<double> SoftFdLimit(const std::string& dir) {
  const std::optional<std::string> limits = ReadFile(dir + "/limits");
  if (!limits) return std::nullopt;
  std::istringstream in(*limits);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("Max open files")) continue;
    std::istringstream fields(line.substr(14));
    std::string soft;
    fields >> soft;
    if (soft == "unlimited") return std::nullopt;
    return ParseNumber(soft);
  }
  return std::nullopt;
}

std::optional<double> OpenFds(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir + "/fd", ec);
  if (ec) return std::nullopt;
  double count = 0;
  for (const auto& entry : it) {
    (void)entry;
    ++count;
  }
  return count;
}

// The fields that come from <root>/<process>/stat (and the boot time in <root>/stat).
ProcessStats ReadStatFields(const std::string& proc_root, const std::string& process) {
  ProcessStats stats;
  const std::optional<std::string> stat = ReadFile(proc_root + "/" + process + "/stat");
  if (!stat) return stats;
  const std::vector<std::string> f = StatFieldsAfterComm(*stat);
  if (f.size() <= StatIndex(24)) return stats;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto utime = ParseNumber(f[StatIndex(14)]);
  const auto stime = ParseNumber(f[StatIndex(15)]);
  const auto start = ParseNumber(f[StatIndex(22)]);
  const auto vsize = ParseNumber(f[StatIndex(23)]);
  const auto rss = ParseNumber(f[StatIndex(24)]);
  if (utime && stime) stats.cpu_seconds = (*utime + *stime) / ticks;
  if (vsize) stats.virtual_memory_bytes = *vsize;
  if (rss) stats.resident_memory_bytes = *rss * page;
  const std::optional<double> boot = BootTimeSeconds(proc_root);
  if (start && boot) stats.start_time_seconds = *boot + *start / ticks;
  return stats;
}

}  // namespace

ProcessStats ReadProcessStats(const std::string& proc_root, const std::string& process) {
  ProcessStats stats = ReadStatFields(proc_root, process);
  const std::string dir = proc_root + "/" + process;
  stats.open_fds = OpenFds(dir);
  stats.max_fds = SoftFdLimit(dir);
  return stats;
}

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  const ProcessStats stats = ReadProcessStats(options_.proc_root);
  std::vector<prometheus::MetricFamily> families;
  auto add = [&](const char* name, const char* help, prometheus::MetricType type,
                 const std::optional<double>& value) {
    if (!value) return;
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = type;
    prometheus::ClientMetric metric;
    if (type == prometheus::MetricType::Counter) {
      metric.counter.value = *value;
    } else {
      metric.gauge.value = *value;
    }
    family.metric.push_back(std::move(metric));
    families.push_back(std::move(family));
  };
  using prometheus::MetricType;
  add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
      MetricType::Counter, stats.cpu_seconds);
  add("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
      stats.resident_memory_bytes);
  add("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
      stats.virtual_memory_bytes);
  add("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, stats.open_fds);
  add("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
      stats.max_fds);
  add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
      MetricType::Gauge, stats.start_time_seconds);
  return families;
}

}  // namespace packrat::metrics
