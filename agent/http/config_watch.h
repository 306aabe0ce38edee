// ConfigWatch: the long polls of the management API — GET /v2/models/{m}/config?wait_after=N
// answers once the model's revision exceeds N (a switch of sets began or ended, a set drained,
// a runtime died, the autoscaler moved or held for a new reason, the model's state changed) or
// the poll's timeout passed, whichever is first; the answer is the config then. Operators and
// tests watch reconfigurations with it instead of polling or reading logs.
//
// One thread waits for all pending polls (the I/O threads never block): woken by Changed() (the
// models' revision listener) and by the nearest deadline.
//
// Thread-safety: all methods may be called from any thread. Answers run on the watch's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <thread>

#include "common/mutex.h"

namespace packrat {

class ConfigWatch {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  ConfigWatch();
  ~ConfigWatch();  // Stop()s

  // Calls `answer` once `revision()` exceeds `after`, or at `deadline`. `revision` is read on
  // the watch's thread and must stay callable until then. After Stop, `answer` runs at once.
  void Add(std::function<uint64_t()> revision, uint64_t after, SteadyTime deadline,
           std::function<void()> answer) EXCLUDES(mu_);
  // Some revision changed: pending polls are checked again.
  void Changed() EXCLUDES(mu_);
  // Answers every pending poll and ends the thread. Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  struct Poll {
    std::function<uint64_t()> revision;
    uint64_t after;
    SteadyTime deadline;
    std::function<void()> answer;
  };
  void Loop() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::list<Poll> polls_ GUARDED_BY(mu_);
  uint64_t changes_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace packrat
