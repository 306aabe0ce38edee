#include "agent/model/instance_sets.h"

#include <algorithm>
#include <utility>

#include "agent/batching/slice_io.h"
#include "agent/model/set_diff.h"
#include "common/load_report.h"
#include "common/logging.h"

namespace packrat {
namespace {

// For the log: how large a batch cut from a backlog of `set` may be, where more than B.
std::string BacklogNote(const InstanceSet& set) {
  if (set.backlog_rows <= set.target_rows) return "";
  return " (a backlog runs in batches of up to " + std::to_string(set.backlog_rows) + ")";
}

RuntimeShape ShapeOf(const Worker& w, int64_t batch) {
  return {w.threads, batch, w.capacity(), w.alive(), w.placement.cpus};
}

bool Contains(const std::vector<std::shared_ptr<Worker>>& v, const std::shared_ptr<Worker>& w) {
  return std::find(v.begin(), v.end(), w) != v.end();
}

// Whether every CPU of `w` is in `share` (always, where the model has no share).
bool InShare(const Worker& w, const std::optional<std::vector<int>>& share) {
  if (!share) return true;
  return std::all_of(w.placement.cpus.begin(), w.placement.cpus.end(), [&share](int cpu) {
    return std::binary_search(share->begin(), share->end(), cpu);
  });
}

// A switch in the slowdown tracker: slices computed until the old set is retired (or until the
// switch returns, where nothing was switched) are left out of the slowdowns.
class SwitchBracket {
 public:
  explicit SwitchBracket(SlowdownTracker* slowdowns) : slowdowns_(slowdowns) {
    if (slowdowns_) slowdowns_->BeginSwitch();
  }
  ~SwitchBracket() {
    if (slowdowns_) slowdowns_->EndSwitch(std::chrono::steady_clock::now());
  }
  SwitchBracket(const SwitchBracket&) = delete;
  SwitchBracket& operator=(const SwitchBracket&) = delete;
  void HandOver() { slowdowns_ = nullptr; }  // the retiring thread ends it

 private:
  SlowdownTracker* slowdowns_;
};

}  // namespace

std::string GroupsString(const std::vector<InstanceGroup>& groups) {
  std::string out;
  for (const InstanceGroup& g : groups) {
    if (!out.empty()) out += " + ";
    out += std::to_string(g.count) + "×⟨t=" + std::to_string(g.threads) +
           ",b=" + std::to_string(g.batch) + "⟩";
  }
  return out;
}

InstanceSets::InstanceSets(InstanceSetsOptions options, const WorkerStarter* starter,
                           SetHooks hooks)
    : options_(std::move(options)), starter_(starter), hooks_(std::move(hooks)) {
  retirer_ = std::thread([this] { RetireLoop(); });
}

InstanceSets::~InstanceSets() {
  {
    MutexLock lock(&mu_);
    stop_retiring_ = true;
  }
  retired_cv_.NotifyAll();
  if (retirer_.joinable()) retirer_.join();
}

void InstanceSets::WaitRetired() const {
  MutexLock lock(&mu_);
  while (!to_retire_.empty() || retiring_) retired_cv_.Wait(&mu_);
}

void InstanceSets::RetireLoop() {
  const LogScope log_scope(options_.model_name);
  MutexLock lock(&mu_);
  for (;;) {
    if (to_retire_.empty()) {
      if (stop_retiring_) return;
      retired_cv_.Wait(&mu_);
      continue;
    }
    const Replaced replaced = std::move(to_retire_.front());
    to_retire_.pop_front();
    retiring_ = true;
    mu_.Unlock();
    Retire(replaced);
    if (options_.slowdowns) options_.slowdowns->EndSwitch(std::chrono::steady_clock::now());
    mu_.Lock();
    retiring_ = false;
    retired_cv_.NotifyAll();
  }
}

std::shared_ptr<InstanceSet> InstanceSets::active() const {
  MutexLock lock(&mu_);
  return active_;
}

bool InstanceSets::ActiveHasDeadRuntime() const {
  const std::shared_ptr<InstanceSet> set = active();
  return set && std::any_of(set->workers.begin(), set->workers.end(),
                            [](const auto& w) { return !w->alive(); });
}

std::vector<int> InstanceSets::LiveParkedThreads() const {
  MutexLock lock(&mu_);
  std::vector<int> threads;
  for (const auto& w : parked_) {
    if (w->alive()) threads.push_back(w->threads);
  }
  return threads;
}

std::vector<int> InstanceSets::KeepableThreads() const {
  return ThreadsInside(options_.allocator ? options_.allocator->Share(options_.model_name)
                                          : std::nullopt);
}

std::vector<int> InstanceSets::ThreadsInside(const std::optional<std::vector<int>>& cpus) const {
  const std::shared_ptr<InstanceSet> set = active();
  if (!set) return {};
  std::vector<int> threads;
  for (const auto& w : set->workers) {
    if (w->alive() && InShare(*w, cpus)) threads.push_back(w->threads);
  }
  return threads;
}

SetSwitcher::StartTimes InstanceSets::start_times() const {
  MutexLock lock(&mu_);
  return start_times_;
}

int InstanceSets::FreeCpus() const {
  const ResourceAllocator* allocator = options_.allocator;
  if (allocator == nullptr) return -1;
  const std::vector<int> outside = allocator->OutsideShare(options_.model_name);
  int free = 0;
  for (const CpuInfo& c : allocator->topology().cpus()) {
    if (std::find(outside.begin(), outside.end(), c.cpu) == outside.end() &&
        allocator->holders(c.cpu) == 0) {
      ++free;
    }
  }
  return free;
}

StatusOr<std::shared_ptr<InstanceSet>> InstanceSets::StartFirst(
    const std::vector<InstanceGroup>& groups, const std::optional<Plan>& plan) {
  RETURN_IF_ERROR(hooks_.prepare(groups));
  std::vector<std::pair<int, int64_t>> shapes;
  for (const InstanceGroup& g : groups) {
    for (int k = 0; k < g.count; ++k) shapes.emplace_back(g.threads, g.batch);
  }
  const uint64_t generation = next_generation_++;
  const auto began = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Worker>> workers,
                   starter_->Start(shapes, {}, generation));
  {
    MutexLock lock(&mu_);
    start_times_.first =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  }
  return hooks_.make_set(generation, groups, plan, std::move(workers), {});
}

void InstanceSets::Install(std::shared_ptr<InstanceSet> set) {
  {
    MutexLock lock(&mu_);
    active_ = std::move(set);
    PublishInstancesLocked();
  }
  Changed();
}

Status InstanceSets::Switch(const std::vector<InstanceGroup>& groups,
                            const std::optional<Plan>& plan, const std::string& reason,
                            bool restart) {
  MutexLock switching(&switch_mu_);
  const auto began = std::chrono::steady_clock::now();
  SwitchBracket bracket(options_.slowdowns);
  const std::shared_ptr<InstanceSet> old = active();
  if (!old) return FailedPrecondition("model '" + options_.model_name + "' is not serving");
  RETURN_IF_ERROR(hooks_.prepare(groups));

  std::vector<std::shared_ptr<Worker>> parked_before;  // oldest first
  const SetDiff diff = DiffFor(*old, groups, &parked_before);
  if (diff.Unchanged(old->workers.size()) &&
      (!plan || (old->plan && old->plan->latency_ms == plan->latency_ms))) {
    return Status::Ok();  // already serving exactly this plan
  }

  // A dead runtime's process has exited: its CPUs are free for its replacement, which then
  // warms up there instead of starting cold beside a lease nobody uses.
  for (size_t i : diff.drop) {
    if (!old->workers[i]->alive()) old->workers[i]->lease = CpuLease();
  }
  std::vector<std::shared_ptr<Worker>> workers;  // the new set: kept, unparked, started
  std::vector<int64_t> batches;
  for (const auto& [i, b] : diff.keep) {
    workers.push_back(old->workers[i]);
    batches.push_back(b);
  }
  const size_t kept_count = workers.size();
  const std::vector<std::shared_ptr<Worker>> unparked = Unpark(diff, parked_before);
  for (size_t k = 0; k < unparked.size(); ++k) {
    workers.push_back(unparked[k]);
    batches.push_back(diff.unpark[k].second);
  }

  const uint64_t generation = next_generation_++;
  PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': reconfiguring (" << reason
                    << ") from " << GroupsString(old->groups) << " to " << GroupsString(groups)
                    << ": keeping " << kept_count << " (" << diff.resized
                    << " at a new batch size), starting " << diff.start.size() << ", unparking "
                    << unparked.size() << ", dropping " << old->workers.size() - kept_count
                    << " instance(s)";
  StatusOr<std::vector<std::shared_ptr<Worker>>> started =
      starter_->Start(diff.start, diff.kept_cpus, generation);
  if (!started.ok()) {
    Repark(unparked, parked_before);
    return started.status();
  }
  const size_t fresh = started->size();
  for (auto& w : *started) {
    batches.push_back(w->batch);
    workers.push_back(std::move(w));
  }
  const std::vector<std::shared_ptr<Worker>> kept(workers.begin(),
                                                  workers.begin() + static_cast<long>(kept_count));
  std::shared_ptr<InstanceSet> next =
      hooks_.make_set(generation, groups, plan, std::move(workers), std::move(batches));

  // Switch: batches cut from now on go to the new set. Only then is the old one queued to
  // retire: its drain (Dispatcher::WaitIdle) counts the slices handed to it, and none may be
  // handed to it after the drain saw it idle.
  {
    MutexLock lock(&mu_);
    draining_.push_back(old);
    active_ = next;
    PublishInstancesLocked();
  }
  hooks_.switched(*next);
  {
    MutexLock lock(&mu_);
    to_retire_.push_back({old, kept});
    bracket.HandOver();
  }
  retired_cv_.NotifyAll();
  Changed();
  NoteSwitched(*next, began, fresh, unparked.size(), restart);
  return Status::Ok();
}

SetDiff InstanceSets::DiffFor(const InstanceSet& old, const std::vector<InstanceGroup>& groups,
                              std::vector<std::shared_ptr<Worker>>* parked_before) {
  // Where the model has a share of the node (model repository, node partition), a runtime on a
  // CPU outside it is neither kept nor unparked: that CPU may be another model's now.
  const std::optional<std::vector<int>> share =
      options_.allocator ? options_.allocator->Share(options_.model_name) : std::nullopt;
  auto usable = [&share](const Worker& w) { return InShare(w, share); };
  EvictOutside(share);
  const RuntimeShape kUnusable{-1, 0, 0, false, {}};  // matches no group: dropped, not unparked
  std::vector<RuntimeShape> serving;
  for (size_t i = 0; i < old.workers.size(); ++i) {
    serving.push_back(usable(*old.workers[i]) ? ShapeOf(*old.workers[i], old.batches[i])
                                              : kUnusable);
  }
  {
    MutexLock lock(&mu_);
    *parked_before = parked_;
  }
  std::vector<RuntimeShape> parked;
  for (const auto& w : *parked_before) {
    parked.push_back(usable(*w) ? ShapeOf(*w, w->batch) : kUnusable);
  }
  return DiffSets(serving, parked, groups, options_.resizable);
}

void InstanceSets::NoteSwitched(const InstanceSet& next,
                                std::chrono::steady_clock::time_point began, size_t started,
                                size_t unparked, bool restart) {
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
  if (started > 0) {
    MutexLock lock(&mu_);
    start_times_.last = took.count();
  }
  if (metrics::ModelMetrics* m = options_.metrics) {
    if (restart) {
      m->runtime_restarts().Increment(static_cast<double>(started + unparked));
    } else {
      m->reconfigurations().Increment();
      m->reconfiguration_duration().Observe(took.count());
    }
  }
  PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': generation " << next.generation
                    << " serving " << GroupsString(next.groups) << ", B=" << next.target_rows
                    << BacklogNote(next) << " after " << static_cast<int64_t>(took.count() * 1000)
                    << " ms";
}

std::vector<std::shared_ptr<Worker>> InstanceSets::Unpark(
    const SetDiff& diff, const std::vector<std::shared_ptr<Worker>>& parked_before) {
  std::vector<std::shared_ptr<Worker>> unparked;
  for (const auto& [i, b] : diff.unpark) unparked.push_back(parked_before[i]);
  {
    MutexLock lock(&mu_);
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                                 [&](const auto& w) { return Contains(unparked, w); }),
                  parked_.end());
  }
  // Unparked runtimes hold their CPUs again (the allocator's rule 4).
  for (const auto& w : unparked) {
    if (options_.allocator) w->lease = options_.allocator->Hold(w->placement.cpus);
  }
  return unparked;
}

void InstanceSets::Repark(const std::vector<std::shared_ptr<Worker>>& unparked,
                          const std::vector<std::shared_ptr<Worker>>& parked_before) {
  for (const auto& w : unparked) w->lease = CpuLease();
  // Back in their places: oldest first, as the limit evicts from the front.
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Worker>> order;
  for (const auto& w : parked_before) {
    if (Contains(parked_, w) || Contains(unparked, w)) order.push_back(w);
  }
  for (const auto& w : parked_) {
    if (!Contains(parked_before, w)) order.push_back(w);
  }
  parked_ = std::move(order);
}

void InstanceSets::Retire(const Replaced& r) {
  const std::shared_ptr<InstanceSet>& old = r.old;
  const std::vector<std::shared_ptr<Worker>>& kept = r.kept;
  // Drain: the old set's running batches finish; then its instances that were not kept are
  // parked (live ones, once the set is idle) or stop.
  const auto deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  bool idle = true;
  if (old->dispatcher && !old->dispatcher->WaitIdle(deadline)) {
    idle = false;
    PACKRAT_LOG(WARNING) << "model '" << options_.model_name << "': generation " << old->generation
                         << " did not finish its batches within " << options_.drain_timeout.count()
                         << " s; stopping it anyway";
  }
  const size_t limit = options_.park_limit;
  // A runtime outside the model's share (the node partition took those CPUs) neither parks nor
  // stays parked: the CPUs are another model's now.
  const std::optional<std::vector<int>> share =
      options_.allocator ? options_.allocator->Share(options_.model_name) : std::nullopt;
  std::vector<std::shared_ptr<Worker>> parking, stopping;
  for (const auto& w : old->workers) {
    if (Contains(kept, w)) continue;
    // A parked decoder finishes the sequences it has (new ones go to the new set) and then
    // idles.
    if (idle && limit > 0 && w->alive() && InShare(*w, share)) {
      w->lease = CpuLease();  // idle: new placements may prefer its CPUs
      parking.push_back(w);
    } else {
      stopping.push_back(w);
    }
  }
  // Decoders finish their sequences here (new ones already go to the new set).
  for (const auto& w : stopping) w->Stop(options_.drain_timeout);
  std::vector<std::shared_ptr<Worker>> evicted;
  {
    // Not between a switch's diff and its taking back the parked runtimes it was made on.
    MutexLock switching(&switch_mu_);
    MutexLock lock(&mu_);
    parked_.insert(parked_.end(), parking.begin(), parking.end());
    // Dead parked runtimes and those outside the share go first, then the oldest beyond the
    // limit.
    for (auto& w : parked_) {
      if (!w->alive() || !InShare(*w, share)) evicted.push_back(std::exchange(w, nullptr));
    }
    parked_.erase(std::remove(parked_.begin(), parked_.end(), nullptr), parked_.end());
    const size_t excess = parked_.size() > limit ? parked_.size() - limit : 0;
    evicted.insert(evicted.end(), parked_.begin(),
                   parked_.begin() + static_cast<std::ptrdiff_t>(excess));
    parked_.erase(parked_.begin(), parked_.begin() + static_cast<std::ptrdiff_t>(excess));
    draining_.erase(std::remove(draining_.begin(), draining_.end(), old), draining_.end());
    PublishInstancesLocked();
  }
  // An idle runtime stops at once; an evicted decoder still finishes its sequences.
  for (const auto& w : evicted) w->Stop(options_.drain_timeout);
  PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': generation " << old->generation
                    << " drained" << (parking.empty() ? "" : ", parking ")
                    << (parking.empty() ? "" : std::to_string(parking.size()) + " runtime(s)");
  Changed();
}

void InstanceSets::EvictOutside(const std::optional<std::vector<int>>& share) {
  if (!share) return;
  std::vector<std::shared_ptr<Worker>> evicted;
  {
    MutexLock lock(&mu_);
    for (auto& w : parked_) {
      if (!InShare(*w, share)) evicted.push_back(std::exchange(w, nullptr));
    }
    if (evicted.empty()) return;
    parked_.erase(std::remove(parked_.begin(), parked_.end(), nullptr), parked_.end());
    PublishInstancesLocked();
  }
  for (const auto& w : evicted) w->Stop(options_.drain_timeout);
  PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': stopped " << evicted.size()
                    << " parked runtime(s) outside its share";
  Changed();
}

void InstanceSets::RetryOrphans(std::vector<WorkSlice> orphans, const std::string& why) const {
  std::vector<std::shared_ptr<Worker>> live;
  if (const std::shared_ptr<InstanceSet> set = active()) {
    for (const auto& w : set->workers) {
      if (w->alive()) live.push_back(w);
    }
  }
  int retried = 0;
  for (WorkSlice& slice : orphans) {
    RuntimeInstance* target = nullptr;
    if (!slice.retried) {
      for (const auto& w : live) {
        if (w->instance && w->instance->batch_size() >= slice.rows &&
            (!target || w->instance->load() < target->load())) {
          target = w->instance.get();
        }
      }
    }
    if (target) {
      slice.retried = true;
      ++retried;
      target->Enqueue(std::move(slice));
    } else {
      FailSlice(slice, Unavailable(why));
      if (slice.on_done) slice.on_done();
    }
  }
  PACKRAT_LOG(WARNING) << "model '" << options_.model_name << "': " << retried << " of "
                       << orphans.size() << " slice(s) of the dead runtime retried";
  Changed();  // a runtime of the active set is dead
}

void InstanceSets::StopAll(std::chrono::steady_clock::time_point deadline) {
  {
    MutexLock lock(&mu_);
    stop_retiring_ = true;
  }
  retired_cv_.NotifyAll();
  if (retirer_.joinable()) retirer_.join();  // the sets replaced so far drain as before
  std::vector<std::shared_ptr<Worker>> workers;
  {
    MutexLock lock(&mu_);
    // A switch racing with the stop queued its old set after the retiring thread ended: its
    // runtimes are in draining_ and stop below.
    for (size_t i = 0; i < to_retire_.size(); ++i) {
      if (options_.slowdowns) options_.slowdowns->EndSwitch(std::chrono::steady_clock::now());
    }
    to_retire_.clear();
    workers = std::move(parked_);  // idle: they stop at once
    parked_.clear();
    if (active_) workers.insert(workers.end(), active_->workers.begin(), active_->workers.end());
    for (const auto& set : draining_) {
      workers.insert(workers.end(), set->workers.begin(), set->workers.end());
    }
    active_.reset();
    draining_.clear();
  }
  for (auto& w : workers) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    w->Stop(std::max(left, std::chrono::milliseconds(0)));
  }
}

void InstanceSets::Fill(ServingSnapshot* s) const {
  MutexLock lock(&mu_);
  std::vector<const Worker*> seen;
  auto add = [&](const InstanceSet& set, bool draining) {
    for (size_t i = 0; i < set.workers.size(); ++i) {
      const auto& w = set.workers[i];
      if (std::find(seen.begin(), seen.end(), w.get()) != seen.end()) continue;
      seen.push_back(w.get());
      WorkerInfo info;
      info.pid = w->pid();
      info.cpus = w->placement.cpus;
      info.threads = w->threads;
      info.batch = i < set.batches.size() ? set.batches[i] : w->batch;
      info.capacity = w->capacity();
      info.generation = set.generation;
      info.draining = draining;
      info.alive = w->alive();
      info.started_cold =
          w->started_cold || LoadReport::Parse(w->load_report()).Get("warmed") == "0";
      info.start_priority = w->start_priority();
      info.cgroup = w->cgroup ? w->cgroup->dir() : std::string();
      s->workers.push_back(std::move(info));
    }
  };
  if (active_) {
    s->generation = active_->generation;
    s->batch = active_->target_rows;
    s->backlog_batch = std::max(active_->target_rows, active_->backlog_rows);
    s->groups = active_->groups;
    s->plan = active_->plan;
    add(*active_, false);
  }
  for (const auto& set : draining_) add(*set, true);
  for (const auto& w : parked_) {
    WorkerInfo info;
    info.pid = w->pid();
    info.cpus = w->placement.cpus;
    info.threads = w->threads;
    info.batch = w->batch;
    info.capacity = w->capacity();
    info.alive = w->alive();
    info.cgroup = w->cgroup ? w->cgroup->dir() : std::string();
    s->parked.push_back(std::move(info));
  }
}

void InstanceSets::PublishInstancesLocked() {
  if (options_.metrics == nullptr) return;
  std::vector<metrics::InstanceCount> counts;
  if (active_) {
    for (const InstanceGroup& g : active_->groups) {
      counts.push_back({g.threads, g.batch, "ready", g.count});
    }
  }
  for (const auto& set : draining_) {
    for (const InstanceGroup& g : set->groups) {
      counts.push_back({g.threads, g.batch, "draining", g.count});
    }
  }
  for (const auto& w : parked_) {
    counts.push_back({w->threads, static_cast<int>(w->batch), "parked", 1});
  }
  options_.metrics->SetInstances(counts);
  // Each runtime once, kept ones being in two sets.
  std::vector<const Worker*> seen;
  int cgroup = 0;
  const auto count = [&](const std::shared_ptr<Worker>& w) {
    if (w == nullptr || std::find(seen.begin(), seen.end(), w.get()) != seen.end()) return;
    seen.push_back(w.get());
    cgroup += w->cgroup && !w->cgroup->dir().empty() ? 1 : 0;
  };
  if (active_) std::for_each(active_->workers.begin(), active_->workers.end(), count);
  for (const auto& set : draining_) std::for_each(set->workers.begin(), set->workers.end(), count);
  std::for_each(parked_.begin(), parked_.end(), count);
  options_.metrics->SetIsolation(cgroup, static_cast<int>(seen.size()) - cgroup);
}

}  // namespace packrat
