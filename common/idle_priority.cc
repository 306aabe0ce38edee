#include "common/idle_priority.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace packrat {
namespace {

bool SetPolicy(pid_t tid, int policy) {
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(tid, policy, &param) == 0;
}

std::vector<pid_t> Threads(pid_t pid) {
  std::vector<pid_t> tids;
  const std::string dir_name = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(dir_name.c_str());
  if (dir == nullptr) return tids;
  while (const dirent* entry = readdir(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (tid > 0) tids.push_back(tid);
  }
  closedir(dir);
  return tids;
}

}  // namespace

bool SetIdlePriority(pid_t tid) { return SetPolicy(tid, SCHED_IDLE); }
bool SetNormalPriority(pid_t tid) { return SetPolicy(tid, SCHED_OTHER); }

bool MayLeaveIdlePriority() {
  bool may = false;
  std::thread probe([&may] { may = SetIdlePriority(0) && SetNormalPriority(0); });
  probe.join();
  return may;
}

Status LeaveIdlePriority(pid_t pid) {
  std::string failed;
  auto leave = [&failed](pid_t tid) {
    if (sched_getscheduler(tid) == SCHED_IDLE && !SetNormalPriority(tid) && errno != ESRCH) {
      failed = "thread " + std::to_string(tid) + ": " + std::strerror(errno);
    }
  };
  leave(pid);
  for (int pass = 0; pass < 2; ++pass) {
    for (pid_t tid : Threads(pid)) leave(tid);
  }
  if (!failed.empty()) return Internal("cannot leave idle priority: " + failed);
  return Status::Ok();
}

std::optional<SchedSample> ReadSchedSample(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; after the last ')' come
  // state (field 3) ... utime (14) and stime (15), space-separated.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields;
  size_t pos = close + 1;
  while (fields.size() < 13) {
    const size_t start = text.find_first_not_of(' ', pos);
    if (start == std::string::npos) return std::nullopt;
    const size_t end = text.find(' ', start);
    fields.push_back(text.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    pos = end;
  }
  if (fields.size() < 13) return std::nullopt;
  const long hz = sysconf(_SC_CLK_TCK);
  const long long ticks = std::atoll(fields[11].c_str()) + std::atoll(fields[12].c_str());
  SchedSample sample;
  sample.cpu = std::chrono::nanoseconds(ticks * (1'000'000'000LL / (hz > 0 ? hz : 100)));
  sample.runnable = fields[0] == "R";
  return sample;
}

}  // namespace packrat
