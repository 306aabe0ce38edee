#include "agent/http/config_watch.h"

#include <algorithm>
#include <vector>

namespace packrat {

ConfigWatch::ConfigWatch() { thread_ = std::thread([this] { Loop(); }); }

ConfigWatch::~ConfigWatch() { Stop(); }

void ConfigWatch::Add(std::function<uint64_t()> revision, uint64_t after, SteadyTime deadline,
                      std::function<void()> answer) {
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      polls_.push_back({std::move(revision), after, deadline, std::move(answer)});
      ++changes_;
      cv_.NotifyAll();
      return;
    }
  }
  answer();
}

void ConfigWatch::Changed() {
  MutexLock lock(&mu_);
  ++changes_;
  cv_.NotifyAll();
}

void ConfigWatch::Stop() {
  std::list<Poll> left;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  if (thread_.joinable()) thread_.join();
  {
    MutexLock lock(&mu_);
    left.swap(polls_);
  }
  for (Poll& p : left) p.answer();
}

void ConfigWatch::Loop() {
  MutexLock lock(&mu_);
  uint64_t seen = 0;
  while (!stop_) {
    seen = changes_;
    const SteadyTime now = std::chrono::steady_clock::now();
    std::vector<std::function<void()>> due;
    SteadyTime next = SteadyTime::max();
    for (auto it = polls_.begin(); it != polls_.end();) {
      if (it->revision() > it->after || it->deadline <= now) {
        due.push_back(std::move(it->answer));
        it = polls_.erase(it);
      } else {
        next = std::min(next, it->deadline);
        ++it;
      }
    }
    if (!due.empty()) {
      mu_.Unlock();
      for (auto& answer : due) answer();
      mu_.Lock();
      continue;
    }
    while (!stop_ && changes_ == seen) {
      if (next == SteadyTime::max()) {
        cv_.Wait(&mu_);
      } else if (!cv_.WaitUntil(&mu_, next)) {
        break;
      }
    }
  }
}

}  // namespace packrat
