#include "agent/model/model_controller.h"

#include <algorithm>

#include "agent/planning/instance_group.h"
#include "agent/planning/migration.h"
#include "agent/planning/plan_evaluator.h"
#include "common/logging.h"

namespace packrat {

AutoscalerOptions AutoscalerOptionsFor(const ModelConfig& config, int threads, bool resizable) {
  const ReconfigurationConfig& rc = config.reconfiguration;
  AutoscalerOptions o;
  o.threads = threads;
  o.max_batch = config.batching.max_batch;
  o.generative = config.generation.enabled;
  o.resizable_runtimes = resizable;
  o.evaluation.max_delay = std::chrono::microseconds(config.batching.max_delay_us);
  o.evaluation.max_inflight_batches = config.batching.max_inflight_batches;
  o.evaluation.max_batch_latency_ms = config.batching.max_batch_latency_ms;
  o.window = BatchSizeEstimator::Options().window;
  o.sample_period_ms = rc.sample_period_ms;
  o.max_utilization = rc.max_utilization;
  o.overload_window_ms = rc.overload_window_ms;
  o.scale_down_delay_ms = rc.scale_down_delay_ms;
  o.p99_target_ms = config.batching.p99_target_ms;
  o.min_capacity = config.generation.enabled ? 0 : rc.min_capacity;  // batched models only
  o.burst_reserve_ms = config.generation.enabled ? 0
                                                 : AutoscalerOptions::kBurstReserveShare *
                                                       config.batching.max_batch_latency_ms;
  return o;
}

LoadTracker LoadTrackerFor(const ModelConfig& config) {
  const ReconfigurationConfig& rc = config.reconfiguration;
  BatchSizeEstimator::Options e;
  e.sample_period = std::chrono::milliseconds(rc.sample_period_ms);
  e.reconfiguration_timeout = BatchSizeEstimator::Options::kSamplesPerDecision * e.sample_period;
  e.min_batch = 1;
  e.max_batch = FloorPowerOfTwo(config.batching.max_batch > 0 ? config.batching.max_batch : 1024);
  // Long enough for the estimator's window, the overload windows and the scale-down span.
  const auto horizon =
      std::chrono::milliseconds(std::max({e.window * rc.sample_period_ms, 4 * rc.overload_window_ms,
                                          rc.scale_down_delay_ms}) +
                                rc.sample_period_ms);
  return LoadTracker(e, horizon);
}

ModelController::ModelController(ModelControllerOptions options, Autoscaler autoscaler,
                                 LoadTracker load, const Optimizer* optimizer)
    : options_(std::move(options)),
      optimizer_(optimizer),
      autoscaler_(std::move(autoscaler)),
      load_(std::move(load)),
      observed_(std::chrono::milliseconds(
                    std::max<int64_t>(autoscaler_.options().scale_down_delay_ms, 0) +
                    std::max<int64_t>(autoscaler_.options().overload_window_ms, 0)) +
                kRiseSpan) {
  MutexLock lock(&mu_);
  adaptive_ = options_.adaptive;
}

ModelController::~ModelController() { Stop(); }

void ModelController::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ModelController::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  std::deque<std::function<void()>> left;
  {
    MutexLock lock(&mu_);
    left.swap(jobs_);
  }
  // Jobs that never ran (plan changes queued behind the one that ran) get their answer.
  for (auto& job : left) job();
}

void ModelController::Post(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      jobs_.push_back(std::move(job));
      cv_.NotifyAll();
      return;
    }
  }
  job();  // stopping: the job sees the state and answers at once
}

void ModelController::RestartSoon() {
  Post([this] {
    // Run by Stop() on its own thread once the control thread stops: then nothing restarts,
    // and last_restart_ (the control thread's) must not be touched.
    if (!options_.serving()) return;
    last_restart_ = SteadyTime{};  // restart at the next tick, without the backoff
    Tick(options_.clock->Now());
  });
}

void ModelController::Loop() {
  const LogScope log_scope(options_.model_name);
  MutexLock lock(&mu_);
  while (!stop_) {
    if (!jobs_.empty()) {
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      mu_.Unlock();
      job();
      mu_.Lock();
      continue;
    }
    const std::optional<SteadyTime> next = load_.estimator().next_sample_time();
    const SteadyTime now = options_.clock->Now();
    if (!next || *next <= now) {
      mu_.Unlock();
      Tick(now);
      mu_.Lock();
      continue;
    }
    options_.clock->WaitUntil(&cv_, &mu_, *next);
  }
}

std::optional<double> ModelController::RecentPeak() const {
  const AutoscalerOptions& o = autoscaler_.options();
  if (o.scale_down_delay_ms <= 0) return std::nullopt;
  const std::chrono::milliseconds stretch =
      o.overload_window_ms > 0 ? std::chrono::milliseconds(o.overload_window_ms) : kRiseSpan;
  return observed_.PeakOver(stretch, std::chrono::milliseconds(o.scale_down_delay_ms));
}

ControllerSnapshot ModelController::Snapshot() const {
  MutexLock lock(&mu_);
  return {rate_,
          rate_measured_,
          rate_shift_,
          recent_peak_,
          behind_,
          rate_since_,
          ewma_,
          estimate_,
          adaptive_,
          last_hold_,
          {moves_.begin(), moves_.end()}};
}

void ModelController::NoteBehind(SteadyTime now) {
  const std::optional<SteadyTime>& since = autoscaler_.state().behind_since;
  const auto window = std::chrono::milliseconds(autoscaler_.options().overload_window_ms);
  const bool behind = since && window.count() > 0 && now - *since >= window;
  MutexLock lock(&mu_);
  behind_ = behind;
}

std::string_view MoveStateName(MoveRecord::State state) {
  switch (state) {
    case MoveRecord::State::kSwitching:
      return "switching";
    case MoveRecord::State::kServing:
      return "serving";
    case MoveRecord::State::kFailed:
      return "failed";
  }
  return "unknown";
}

void ModelController::NoteHold(const Reason& r) {
  bool changed;
  {
    MutexLock lock(&mu_);
    // A hold that repeats at every decision is one change, not one per decision.
    changed = !last_hold_ || last_hold_->rule != r.rule || last_hold_->to_batch != r.to_batch ||
              last_hold_->from_batch != r.from_batch;
    last_hold_ = r;
  }
  if (!r.quiet) PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': " << r.text;
  if (changed) Changed();
}

void ModelController::NoteMove(const Reason& r) {
  {
    MutexLock lock(&mu_);
    moves_.push_back({r, MoveRecord::State::kSwitching, ""});
    if (moves_.size() > kRecentMoves) moves_.pop_front();
  }
  Changed();
}

void ModelController::NoteMoveDone(const Status& status) {
  {
    MutexLock lock(&mu_);
    if (moves_.empty()) return;
    moves_.back().state = status.ok() ? MoveRecord::State::kServing : MoveRecord::State::kFailed;
    moves_.back().error = status.message();
  }
  Changed();
}

void ModelController::Tick(SteadyTime now) {
  if (!options_.serving()) return;
  const std::shared_ptr<InstanceSet> active = options_.sets->active();
  if (!active) return;
  // Dead runtimes are replaced (again, after a failed attempt, once the backoff has passed).
  if (options_.sets->ActiveHasDeadRuntime() && now - last_restart_ >= options_.restart_backoff) {
    last_restart_ = now;
    if (Status s =
            options_.sets->Switch(active->groups, active->plan, "restarting dead runtimes", true);
        !s.ok()) {
      PACKRAT_LOG(ERROR) << "model '" << options_.model_name
                         << "': restart failed: " << s.message();
    }
    return;
  }
  const int64_t arrived = options_.rows_arrived();
  if (!load_.Sample(now, options_.rows_in_system(), arrived)) return;
  observed_.Sample(now, arrived);
  bool adaptive;
  {
    MutexLock lock(&mu_);
    const std::optional<double> slow = load_.arrivals().Over(kRateSpan);
    const std::optional<double> fast = load_.arrivals().Over(kRiseSpan);
    if (slow || fast) rate_ = std::max(slow.value_or(0.0), fast.value_or(0.0));
    rate_measured_ = rate_measured_ || slow.has_value();
    rate_shift_ = load_.arrivals().Shift(rate_, kShiftMinSpan, kRiseSpan, kShiftSigmas);
    if (rate_shift_ || !rate_since_) rate_since_ = now;
    recent_peak_ = RecentPeak();
    ewma_ = load_.estimator().ewma();
    estimate_ = load_.estimator().Estimate();
    adaptive = adaptive_;
  }
  if (options_.metrics) {
    options_.metrics->estimated_batch().Set(static_cast<double>(load_.estimator().Estimate()));
  }
  ServingView view = ViewOf(*active);
  if (options_.oldest_queued) {
    if (const std::optional<SteadyTime> oldest = options_.oldest_queued()) {
      view.oldest_wait_ms = std::chrono::duration<double, std::milli>(now - *oldest).count();
    }
  }
  const SetSwitcher::StartTimes starts = options_.sets->start_times();
  view.first_start_s = starts.first;
  view.last_start_s = starts.last;
  view.adaptive = adaptive;
  Decision d = autoscaler_.Decide(view, load_, now);
  NoteBehind(now);
  if (d.hold) NoteHold(*d.hold);
  if (!d.move) return;
  const Move& move = *d.move;
  NoteMove(move.reason);
  if (d.restart_arrivals) load_.arrivals().Restart();
  const Status s = SwitchForMove(move);
  NoteMoveDone(s);
  if (!s.ok()) {
    PACKRAT_LOG(ERROR) << "model '" << options_.model_name
                       << "': reconfiguration failed, the current set keeps serving: "
                       << s.message();
  }
  autoscaler_.Applied(move, s.ok(), options_.clock->Now(), load_);
  NoteBehind(options_.clock->Now());
}

Status ModelController::SwitchForMove(const Move& move) {
  const AutoscalerOptions& o = autoscaler_.options();
  if (!o.resizable_runtimes || o.generative) {
    return options_.sets->Switch(move.plan.groups, move.plan, move.reason.text, false);
  }
  std::optional<double> rate = move.reason.rate;
  if (!rate) {
    MutexLock lock(&mu_);
    if (rate_ > 0) rate = rate_;
  }
  const SlowdownFn slowdown = Slowdowns();
  const double need = autoscaler_.NeededCapacity(move.plan, rate, slowdown);
  return Migrate(move.plan, rate, need, slowdown, std::nullopt, move.reason.text);
}

Status ModelController::Resize(const ResizeRequest& request) {
  autoscaler_.set_threads(request.threads);
  const std::shared_ptr<InstanceSet> active = options_.sets->active();
  const std::string why = "node partition: " + std::to_string(request.threads) + " CPU(s)";
  std::optional<Plan> next = request.plan;
  if (!next && optimizer_ != nullptr && active) {
    // No plan on these CPUs serves the model's rate (JointPartition): the plan of most capacity
    // they allow, as rule 0 takes behind (where it fits them: one on the serving runtimes may
    // not); else the optimizer's for the largest B up to the serving one that it can split.
    std::optional<Autoscaler::PlanChoice> most = autoscaler_.MostCapacity(ViewOf(*active));
    if (most && ValidatePlanGroups(most->plan.groups, request.threads, "").ok()) {
      next = std::move(most->plan);
    } else {
      const int64_t serving_b = std::max<int64_t>(1, active->target_rows);
      auto solved = optimizer_->Solve(request.threads, static_cast<int>(serving_b));
      for (int64_t b = FloorPowerOfTwo(serving_b); !solved.ok() && b >= 1; b /= 2) {
        solved = optimizer_->Solve(request.threads, static_cast<int>(b));
      }
      if (!solved.ok()) return solved.status();
      next = std::move(solved).value();
    }
  }
  Status status;
  if (next) status = SwitchForResize(*next, request.rate, request.at_once, why);
  // A shrink another model waits for is done once the runtimes outside the smaller share have
  // drained and stopped (or parked inside it): their CPUs are the other model's.
  if (request.at_once) options_.sets->WaitRetired();
  if (status.ok()) {
    autoscaler_.Reset();  // its holds and timers were for the old budget
    NoteBehind(options_.clock->Now());
  }
  Changed();
  return status;
}

ServingView ModelController::ViewOf(const InstanceSet& active) const {
  ServingView view;
  view.batch = active.target_rows;
  view.backlog_batch = active.backlog_rows;
  view.groups = active.groups;
  if (active.plan) view.plan_latency_ms = active.plan->latency_ms;
  view.parked_threads = options_.sets->LiveParkedThreads();
  view.slowdown = Slowdowns();
  if (const SlowdownTracker* slowdowns = options_.slowdowns) {
    view.measured = [slowdowns](int threads) { return slowdowns->Measured(threads); };
  }
  return view;
}

SlowdownFn ModelController::Slowdowns() const {
  const SlowdownTracker* slowdowns = options_.slowdowns;
  if (slowdowns == nullptr) return nullptr;
  return [slowdowns](int threads) { return slowdowns->Get(threads); };
}

Status ModelController::SwitchForResize(const Plan& fresh, double planned, bool at_once,
                                        const std::string& why) {
  if (planned <= 0) {
    MutexLock lock(&mu_);
    planned = rate_;
  }
  const std::optional<double> rate = planned > 0 ? std::optional<double>(planned) : std::nullopt;
  const SlowdownFn slowdown = Slowdowns();
  // Keeping runtimes at another b needs resizable ones (SetDiff); others switch as planned.
  if (!autoscaler_.options().resizable_runtimes) {
    return options_.sets->Switch(fresh.groups, fresh, why, false);
  }
  const double need = autoscaler_.NeededCapacity(fresh, rate, slowdown);
  // 0. A shrink another model waits for: the runtimes inside the smaller share alone, where
  // they keep up, switch at once (they start nothing); the switch to fresh is asked for next.
  if (at_once) {
    const std::vector<int> kept = options_.sets->KeepableThreads();
    if (std::optional<Autoscaler::OnInstances> alone =
            autoscaler_.PlanOnInstances(kept, fresh.batch, rate, slowdown, need)) {
      return options_.sets->Switch(
          alone->plan.groups, alone->plan,
          why + ", " + std::string(ResizeStepName(ResizeStep::kInsideAtOnce)), false);
    }
  }
  // 1. Keep the serving runtimes where that costs little: the new set then starts only on the
  // CPUs the model gains, not beside its busy runtimes on the ones it keeps. A resize is urgent
  // (a model waits for the CPUs, or this one for more), so the bar is kResizeMargin, wider than
  // the autoscaler's restart margin: the autoscaler still moves to a faster plan later, at its
  // own margin, once the load has settled.
  // 2. Otherwise migrate in stages (Migrate) until a plan keeping what serves then passes (1),
  // or the stages end in fresh itself.
  // While the model is behind (rows queued beyond two batches of its set), capacity now is
  // worth more than a better p99 one more stage's start later: the bar is kBehindResizeMargin.
  const std::shared_ptr<InstanceSet> active = options_.sets->active();
  const bool behind =
      active && options_.rows_in_system() > 2 * std::max<int64_t>(1, active->target_rows);
  return Migrate(fresh, rate, need, slowdown, behind ? kBehindResizeMargin : kResizeMargin, why);
}

std::string_view ModelController::ResizeStepName(ResizeStep step) {
  switch (step) {
    case ResizeStep::kInsideAtOnce:
      return "at once on the runtimes inside it";
    case ResizeStep::kKeeping:
      return "keeping the serving runtimes";
    case ResizeStep::kStage:
      return "stage";
  }
  return "";
}

Status ModelController::Migrate(const Plan& fresh, std::optional<double> rate, double need,
                                const SlowdownFn& slowdown, std::optional<double> keep_margin,
                                const std::string& why) {
  const std::vector<int> target = ThreadCounts(fresh.groups);
  const std::shared_ptr<InstanceSet> active = options_.sets->active();
  const int64_t serving_batch = active ? active->target_rows : 0;
  const StageEstimator estimate = autoscaler_.StageEstimates(fresh, rate, slowdown, serving_batch);
  std::optional<double> p99_bound_ms;  // of every stage, set at the first
  for (int stage = 1;; ++stage) {
    const std::vector<int> serving = options_.sets->KeepableThreads();
    std::optional<Plan> kept;
    if (keep_margin) kept = autoscaler_.KeepingPlan(serving, fresh, rate, slowdown, *keep_margin);
    if (kept) {
      return options_.sets->Switch(kept->groups, *kept,
                                   why + ", " + std::string(ResizeStepName(ResizeStep::kKeeping)) +
                                       " (passed over " + fresh.ConfigString() + ")",
                                   false);
    }
    const int free = options_.sets->FreeCpus();
    if (stage > kMaxResizeStages || free < 0 || serving.empty()) break;
    if (!p99_bound_ms) p99_bound_ms = StageP99BoundMs(estimate, serving, target);
    const std::optional<MigrationStep> step =
        NextMigrationStep(serving, free, target, estimate, need, *p99_bound_ms);
    if (!step || step->final) break;
    const std::optional<Autoscaler::OnInstances> on =
        autoscaler_.PlanOnInstances(step->instances, fresh.batch, rate, slowdown, 0,
                                    std::max<int64_t>(fresh.batch, serving_batch));
    if (!on) break;
    RETURN_IF_ERROR(options_.sets->Switch(
        on->plan.groups, on->plan,
        why + ", " + std::string(ResizeStepName(ResizeStep::kStage)) + " " + std::to_string(stage) +
            " towards " + fresh.ConfigString() + " (starting " +
            std::to_string(step->started.size()) + " on free CPUs, dropping " +
            std::to_string(step->dropped.size()) + ")",
        false));
    // The runtimes the stage dropped free the CPUs the next stage starts on.
    options_.sets->WaitRetired();
    // A job posted meanwhile (the node partition's resize, a management change) changes the
    // budget or the plan this migration heads for: it goes first, and the stage serves.
    if (Superseded()) {
      PACKRAT_LOG(INFO) << "model '" << options_.model_name << "': the migration towards "
                        << fresh.ConfigString() << " stops after stage " << stage
                        << ": a later change waits";
      return Status::Ok();
    }
  }
  return options_.sets->Switch(fresh.groups, fresh, why, false);
}

bool ModelController::Superseded() const {
  MutexLock lock(&mu_);
  return stop_ || !jobs_.empty();
}

Status ModelController::ApplyChange(const PlanChange& change) {
  const bool adaptive =
      change.adaptive.value_or(!change.instances && !change.batch && optimizer_ != nullptr);
  Status status;
  if (change.instances) {
    status = options_.sets->Switch(*change.instances, std::nullopt, "management API", false);
  } else if (change.batch) {
    if (optimizer_ == nullptr) return FailedPrecondition("no profile to plan B from");
    auto plan = optimizer_->Solve(autoscaler_.options().threads, static_cast<int>(*change.batch));
    if (!plan.ok()) return plan.status();
    status = options_.sets->Switch(plan->groups, *plan,
                                   "management API: B=" + std::to_string(*change.batch), false);
  }
  // The answer reports the change done: the old set drained and its runtimes parked or stopped.
  options_.sets->WaitRetired();
  if (status.ok()) {
    // What the estimator saw under the old plan (one request of 64 rows, say) is stale.
    load_.Restart();
    autoscaler_.Reset();
    MutexLock lock(&mu_);
    adaptive_ = adaptive;
  }
  return status;
}

}  // namespace packrat
