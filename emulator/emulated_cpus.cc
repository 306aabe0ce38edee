#include "emulator/emulated_cpus.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

namespace packrat::emulator {

StatusOr<std::unique_ptr<EmulatedCpus>> EmulatedCpus::Create(std::unique_ptr<shm::VirtualCpus> node,
                                                             EmulatedCpusOptions options) {
  int holder = -1;
  if (node) {
    ASSIGN_OR_RETURN(holder, node->Claim(getpid()));
    node->WatchAll(holder, options.neighbour_slowdown > 0);
  }
  return std::unique_ptr<EmulatedCpus>(new EmulatedCpus(std::move(node), holder, options));
}

EmulatedCpus::~EmulatedCpus() {
  if (node_) node_->Release(holder_);
}

ContentionView EmulatedCpus::ViewOf(const std::vector<int>& cpus) const {
  ContentionView view;
  view.max_busy = node_->MaxBusy(cpus);
  view.busy_cpus = node_->busy_cpus();
  view.own_cpus = static_cast<int>(cpus.size());
  view.num_cpus = node_->num_cpus();
  return view;
}

double EmulatedCpus::RateNow(const std::vector<int>& cpus) const {
  return node_ ? ContentionRate(ViewOf(cpus), options_.neighbour_slowdown) : 1.0;
}

double EmulatedCpus::IdleRateNow(const std::vector<int>& cpus) const {
  return node_ ? IdleContentionRate(ViewOf(cpus), options_.neighbour_slowdown) : 1.0;
}

bool EmulatedCpus::ComputeIdle(SliceProgress* progress, const std::vector<int>& cpus,
                               const std::function<bool()>& keep_going, SteadyTime idle_until) {
  using std::chrono::steady_clock;
  uint32_t seen = node_->generation();
  auto checked = steady_clock::now();
  if (!idle_watch_) idle_watch_.emplace(checked);
  const std::chrono::nanoseconds done_before = progress->Done(checked);
  progress->SetRate(checked, IdleRateNow(cpus));
  while (true) {
    auto now = steady_clock::now();
    const std::chrono::nanoseconds done = progress->Done(now);
    if (idle_watch_->Starved(now, idle_done_ + (done - done_before))) idle_starved_ = true;
    if (progress->Finished(now) || now >= idle_until || idle_starved_) {
      idle_done_ += done - done_before;
      return true;
    }
    if (now - checked >= options_.poll) {
      checked = now;
      if (!keep_going()) return false;
    }
    const SteadyTime wake = std::min({progress->FinishAt(), idle_until, now + options_.poll});
    node_->WaitForChange(seen, wake - now);
    const uint32_t generation = node_->generation();
    if (generation != seen) {
      seen = generation;
      now = steady_clock::now();
      progress->SetRate(std::min(node_->changed_at(), now), IdleRateNow(cpus));
    }
  }
}

StatusOr<bool> EmulatedCpus::Compute(std::chrono::nanoseconds work, const std::vector<int>& cpus,
                                     const std::function<bool()>& keep_going,
                                     SteadyTime idle_until) {
  using std::chrono::steady_clock;
  if (!node_) {
    const auto end = steady_clock::now() + work;
    while (true) {
      const auto now = steady_clock::now();
      if (now >= end) return true;
      if (!keep_going()) return false;
      std::this_thread::sleep_for(std::min<steady_clock::duration>(end - now, options_.poll));
    }
  }
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= node_->num_cpus()) {
      return InvalidArgument("CPU " + std::to_string(cpu) + " is outside the node");
    }
  }
  SliceProgress progress(work, steady_clock::now(), 1.0);
  if (!idle_starved_ && steady_clock::now() < idle_until) {
    if (!ComputeIdle(&progress, cpus, keep_going, idle_until)) return false;
    if (progress.Finished(steady_clock::now())) return true;
  }
  RETURN_IF_ERROR(node_->Mark(holder_, cpus));
  // Rung by every change of the counts of `cpus` (of any CPU with a neighbour slowdown).
  uint32_t seen = node_->doorbell(holder_);
  auto checked = steady_clock::now();
  progress.SetRate(checked, RateNow(cpus));
  bool finished = true;
  while (true) {
    auto now = steady_clock::now();
    if (progress.Finished(now)) break;
    if (now - checked >= options_.poll) {
      checked = now;
      if (!keep_going()) {
        finished = false;
        break;
      }
    }
    node_->WaitForDoorbell(
        holder_, seen, std::min<steady_clock::duration>(progress.FinishAt() - now, options_.poll));
    const uint32_t rung = node_->doorbell(holder_);
    if (rung != seen) {
      // The counts changed at rung_at(): the time before it ran at the old speed.
      seen = rung;
      now = steady_clock::now();
      progress.SetRate(std::min(node_->rung_at(holder_), now), RateNow(cpus));
    }
  }
  node_->Unmark(holder_);
  return finished;
}

}  // namespace packrat::emulator
