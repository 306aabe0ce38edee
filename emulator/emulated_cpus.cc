#include "emulator/emulated_cpus.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "emulator/contention.h"
#include "emulator/slice_progress.h"

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

double EmulatedCpus::RateNow(const std::vector<int>& cpus) const {
  if (!node_) return 1.0;
  ContentionView view;
  view.max_busy = node_->MaxBusy(cpus);
  view.busy_cpus = node_->busy_cpus();
  view.own_cpus = static_cast<int>(cpus.size());
  view.num_cpus = node_->num_cpus();
  return ContentionRate(view, options_.neighbour_slowdown);
}

StatusOr<bool> EmulatedCpus::Compute(std::chrono::nanoseconds work, const std::vector<int>& cpus,
                                     const std::function<bool()>& keep_going) {
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
  RETURN_IF_ERROR(node_->Mark(holder_, cpus));
  // Rung by every change of the counts of `cpus` (of any CPU with a neighbour slowdown).
  uint32_t seen = node_->doorbell(holder_);
  auto checked = steady_clock::now();
  SliceProgress progress(work, checked, RateNow(cpus));
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
