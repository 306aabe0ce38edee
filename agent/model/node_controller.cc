#include "agent/model/node_controller.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "agent/kserve/kserve_codec.h"
#include "agent/model/model_controller.h"
#include "agent/model/served_model.h"
#include "agent/model/share_shrink.h"
#include "agent/planning/poisson_noise.h"
#include "agent/pool/cpu_list.h"
#include "common/logging.h"

namespace packrat {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

std::string PlanJson(const std::optional<Plan>& plan) {
  if (!plan) return "null";
  std::string out = "[";
  for (const InstanceGroup& g : plan->groups) {
    if (out.size() > 1) out += ',';
    out += "{\"count\":" + std::to_string(g.count) + ",\"threads\":" + std::to_string(g.threads) +
           ",\"batch\":" + std::to_string(g.batch) + "}";
  }
  return out + "]";
}

std::string CountsJson(const std::map<std::string, int>& counts) {
  std::string out = "{";
  for (const auto& [name, n] : counts) {
    if (out.size() > 1) out += ',';
    AppendJsonString(out, name);
    out += ':' + std::to_string(n);
  }
  return out + "}";
}

// The rate a model is planned for: its arrivals, plus its backlog spread over
// kBacklogDrainSeconds (so that it gets the CPUs to drain its queue, not only to keep up).
// Arrivals are the rate that rises over 1 s and falls over 5 s (the model's own hysteresis),
// except where they stepped beyond Poisson noise (ControllerSnapshot::rate_shift, 3σ): then
// the rate since the step counts at once, up or down, within about 300 ms of it. An idle
// model's noise (a few req/s, none in the last second) is no step. Without the step, a shift
// of the load from one model to another would move the CPUs in two steps (the 5-s fall), each
// a switch, and plan the first for part of the new rate (the 1-s rise).
constexpr double kBacklogDrainSeconds = 5.0;

// `c`: the model's controller_snapshot(), taken once by the caller.
double PlannedRate(const ServedModel& model, const std::optional<ControllerSnapshot>& c) {
  if (!c) return 0;
  return c->rate_shift.value_or(c->rate) +
         static_cast<double>(model.backlog_rows()) / kBacklogDrainSeconds;
}

// `snapshot`: the model's controller_snapshot(), taken once by the caller; `held`: the CPUs
// the model's share holds now (0: none).
ModelDemand DemandOf(const ServedModel& model, const std::optional<ControllerSnapshot>& snapshot,
                     int held) {
  const ModelConfig& c = model.config();
  const AutoscalerOptions a = AutoscalerOptionsFor(c, 1, false);
  ModelDemand d;
  d.name = c.name;
  d.optimizer = model.optimizer();
  d.rate = PlannedRate(model, snapshot);
  if (snapshot) d.peak = snapshot->recent_peak.value_or(0.0);
  d.held_cpus = held;
  if (c.batching.p99_target_ms > 0) d.p99_target_ms = c.batching.p99_target_ms;
  d.weight = c.weight;
  d.min_threads = c.min_threads;
  d.max_batch = std::max<int64_t>(1, c.batching.max_batch);
  d.evaluation = a.evaluation;
  d.max_utilization = a.max_utilization;
  d.slowdown = [&model](int threads) { return model.Slowdown(threads); };
  return d;
}

// Resizes `model`; the future holds the outcome: ready once the model's new set serves (a
// growth waits for no slices that the old runtimes still run on CPUs the model keeps), or, for a
// shrink `at_once`, which frees CPUs for another model, once those runtimes have drained.
std::future<Status> ResizeAsync(const std::shared_ptr<ServedModel>& model, ResizeRequest request) {
  auto outcome = std::make_shared<std::promise<Status>>();
  std::future<Status> done = outcome->get_future();
  model->Resize(std::move(request), [outcome](Status s) { outcome->set_value(std::move(s)); });
  return done;
}

}  // namespace

NodeController::NodeController(NodeControllerOptions options)
    : options_(std::move(options)), policy_(options_.policy) {}

NodeController::~NodeController() { Stop(); }

void NodeController::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void NodeController::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  if (thread_.joinable()) thread_.join();
}

void NodeController::Changed() {
  MutexLock lock(&mu_);
  changed_ = true;
  cv_.NotifyAll();
}

void NodeController::Loop() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      const SteadyTime deadline = options_.clock->Now() + options_.interval;
      bool stepped = false;
      while (!stop_ && !changed_) {
        const SteadyTime watch = std::min(deadline, options_.clock->Now() + options_.watch);
        if (options_.clock->WaitUntil(&cv_, &mu_, watch)) continue;  // notified (or spurious)
        if (options_.clock->Now() >= deadline) break;
        // A step decides one watch period after it is seen: each model samples its arrivals on
        // its own clock, and a load moving from one model to another shows in the other's
        // rate up to a sample period later (deciding on the rise alone once moved CPUs to an
        // overloaded model that the falling one still held).
        if (stepped) break;
        mu_.Unlock();
        stepped = Stepped();
        mu_.Lock();
      }
      if (stop_) return;
      changed_ = false;
    }
    Decide(options_.clock->Now());
  }
}

bool NodeController::Stepped() const {
  const std::vector<std::shared_ptr<ServedModel>> models = Participants();
  if (models.size() < 2) return false;
  // A model counts where its arrivals stepped (arrival_rate_shift), or where no decision has
  // planned for it yet; not where only its 1-s rate is climbing, which would decide on part of a
  // step before its size is known.
  // A model that fell behind since the last decision counts too.
  std::vector<std::tuple<std::string, bool, double, bool>> rates;
  for (const auto& m : models) {
    const std::optional<ControllerSnapshot> c = m->controller_snapshot();
    rates.emplace_back(m->name(), c && c->rate_shift.has_value(), PlannedRate(*m, c),
                       c && c->behind);
  }
  MutexLock lock(&mu_);
  for (const auto& [name, shifted, rate, behind] : rates) {
    const auto found = planned_.find(name);
    if (behind && (found == planned_.end() || !found->second.behind)) return true;
    if (found != planned_.end() && !shifted) continue;
    const double planned = found == planned_.end() ? 0.0 : found->second.rate;
    // Beyond a fraction kWatchRise − 1 of the planned rate, and beyond Poisson noise over a
    // second at it (an idle model's 2 req/s that read 4 is no step).
    if (std::abs(rate - planned) > (kWatchRise - 1) * planned &&
        BeyondPoissonNoise(rate, planned, ModelController::kShiftSigmas)) {
      return true;
    }
  }
  return false;
}

std::vector<std::shared_ptr<ServedModel>> NodeController::Participants() const {
  std::vector<std::shared_ptr<ServedModel>> models;
  for (const std::shared_ptr<ServedModel>& m : options_.registry->List()) {
    if (m->PartitionCandidate() && !m->unloading() && m->optimizer() != nullptr) {
      models.push_back(m);
    }
  }
  return models;
}

std::vector<int> NodeController::Pool(
    const std::vector<std::shared_ptr<ServedModel>>& models) const {
  std::set<std::string> names;
  for (const auto& m : models) names.insert(m->name());
  const std::map<std::string, std::vector<int>> shares = options_.allocator->Shares();
  std::vector<int> pool;
  for (const CpuInfo& c : options_.allocator->topology().cpus()) {
    bool other = false;
    for (const auto& [name, cpus] : shares) {
      other = other || (!names.count(name) && std::binary_search(cpus.begin(), cpus.end(), c.cpu));
    }
    if (!other) pool.push_back(c.cpu);
  }
  std::sort(pool.begin(), pool.end());
  return pool;
}

void NodeController::SplitFreeCpus(const std::vector<std::shared_ptr<ServedModel>>& models) {
  MutexLock lock(&decide_mu_);
  std::vector<std::shared_ptr<ServedModel>> candidates;
  for (const auto& m : models) {
    if (m->PartitionCandidate() && !options_.allocator->Share(m->name())) candidates.push_back(m);
  }
  const std::vector<int> free = options_.allocator->FreeCpus();
  const size_t k = candidates.size();
  if (k < 2 || free.size() < k) return;  // one model plans for the node; or no room to split
  size_t next = 0;
  for (size_t i = 0; i < k; ++i) {
    const size_t n = free.size() / k + (i < free.size() % k ? 1 : 0);
    const std::vector<int> cpus(free.begin() + static_cast<std::ptrdiff_t>(next),
                                free.begin() + static_cast<std::ptrdiff_t>(next + n));
    next += n;
    if (Status s = options_.allocator->SetShare(candidates[i]->name(), cpus); !s.ok()) {
      PACKRAT_LOG(WARNING) << "node partition: no initial share for '" << candidates[i]->name()
                           << "': " << s.message();
      continue;
    }
    PACKRAT_LOG(INFO) << "node partition: '" << candidates[i]->name() << "' starts on CPUs "
                      << FormatCpuList(cpus);
  }
}

Status NodeController::MakeRoom(const std::string& model, int cpus) {
  MutexLock lock(&decide_mu_);
  const std::vector<std::shared_ptr<ServedModel>> models = Participants();
  const std::vector<int> pool = Pool(models);
  const int total =
      std::min<int>(static_cast<int>(pool.size()), options_.allocator->thread_budget()) - cpus;
  if (models.empty() || total < 1) {
    return ResourceExhausted("no CPUs to make room for model '" + model + "'");
  }
  std::vector<ModelDemand> demands;
  for (const auto& m : models) demands.push_back(DemandOf(*m, m->controller_snapshot(), 0));
  ASSIGN_OR_RETURN(PartitionResult result, partition_.Solve(demands, total));
  Proposal proposal;
  const std::map<std::string, std::vector<int>> shares = options_.allocator->Shares();
  for (size_t i = 0; i < models.size(); ++i) {
    // Only shrinks: a model without a share yet is given one of its target size here too.
    const auto share = shares.find(models[i]->name());
    const int now = share == shares.end() ? total : static_cast<int>(share->second.size());
    proposal.target[models[i]->name()] = std::min(now, result.models[i].cpus);
    proposal.plans[models[i]->name()] = result.models[i].plan;
    proposal.rates[models[i]->name()] = demands[i].rate;
  }
  PACKRAT_LOG(INFO) << "node partition: making room for model '" << model << "' (" << cpus
                    << " CPU(s)): " << CountsJson(proposal.target);
  const std::chrono::milliseconds took = Move(models, proposal, pool);
  policy_.MoveDone(options_.clock->Now(), took);
  if (options_.metrics) options_.metrics->partition_moves("room").Increment();
  return Status::Ok();
}

void NodeController::Decide(SteadyTime now) {
  MutexLock decide(&decide_mu_);
  const std::vector<std::shared_ptr<ServedModel>> models = Participants();
  if (models.size() < 2) {
    MutexLock lock(&mu_);
    json_ = "{\"active\":false,\"why\":\"fewer than two instances: auto models\"" +
            (last_move_json_.empty() ? std::string() : ",\"last_move\":" + last_move_json_) + "}";
    return;
  }
  // A model whose rate is not measured yet (it became ready less than kRateSpan ago) would
  // plan for none and be left its floor: wait for it (its share holds meanwhile). Deciding on
  // a first second without arrivals once left an idle model 1 CPU for its burst.
  for (const auto& m : models) {
    const std::optional<ControllerSnapshot> c = m->controller_snapshot();
    if (!c || !c->rate_measured) return;
  }
  // The pool: every CPU no other model's share holds.
  const std::map<std::string, std::vector<int>> shares = options_.allocator->Shares();
  const std::vector<int> pool = Pool(models);
  const int total =
      std::min<int>(static_cast<int>(pool.size()), options_.allocator->thread_budget());

  std::vector<ModelDemand> demands;
  std::vector<std::optional<ControllerSnapshot>> snapshots;
  for (const auto& m : models) {
    const auto share = shares.find(m->name());
    snapshots.push_back(m->controller_snapshot());
    demands.push_back(DemandOf(*m, snapshots.back(),
                               share == shares.end() ? 0 : static_cast<int>(share->second.size())));
  }
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < demands.size(); ++i) {  // what this decision saw
      planned_[demands[i].name] = {demands[i].rate, snapshots[i] && snapshots[i]->behind};
    }
  }
  StatusOr<PartitionResult> result = partition_.SolveWithReserve(demands, total);
  if (!result.ok()) {
    PACKRAT_LOG(WARNING) << "node partition: " << result.status().message();
    MutexLock lock(&mu_);
    std::string json = "{\"active\":true,\"cpus\":" + std::to_string(total) + ",\"error\":";
    AppendJsonString(json, result.status().message());
    json_ = json + "}";
    return;
  }

  Proposal proposal = Propose(models, snapshots, demands, *result, shares, total, now);
  PartitionDecision decision = policy_.Decide(proposal.view, now);
  if (decision.move && decision.reason == PartitionReason::kGain) {
    HoldRestartingShrink(models, proposal, &decision);
  }
  {
    const std::string json = DecisionJson(total, demands, *result, shares, proposal, decision);
    MutexLock lock(&mu_);
    json_ = json + (last_move_json_.empty() ? "" : ",\"last_move\":" + last_move_json_) + "}";
  }
  if (!decision.move) {
    NoteHold(decision, proposal);
    return;
  }
  last_hold_.clear();
  CarryOut(models, proposal, pool, decision);
}

NodeController::Proposal NodeController::Propose(
    const std::vector<std::shared_ptr<ServedModel>>& models,
    const std::vector<std::optional<ControllerSnapshot>>& snapshots,
    const std::vector<ModelDemand>& demands, const PartitionResult& result,
    const std::map<std::string, std::vector<int>>& shares, int total, SteadyTime now) {
  Proposal proposal;
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelShare& share = result.models[i];
    PartitionModel p;
    p.name = models[i]->name();
    if (const std::optional<ControllerSnapshot>& c = snapshots[i]) {
      p.behind = c->behind;
      if (c->rate_since) {
        p.rate_age = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(SteadyTime::duration::zero(), now - *c->rate_since));
      }
    }
    const auto current = shares.find(p.name);
    p.current_cpus = current == shares.end() ? 0 : static_cast<int>(current->second.size());
    p.target_cpus = share.cpus;
    p.rate = demands[i].rate;
    p.min_threads = demands[i].min_threads;
    p.slo_ms = demands[i].p99_target_ms;
    p.p99_target_ms = share.p99_ms;
    p.ratio_target = share.ratio;
    // The policy weighs both partitions at the rate now, on the model's own floor: a share
    // planned with a burst reserve or with floors of held CPUs (SolveWithReserve) is judged by
    // what it does for the model now, so a reserve shapes the target and never makes a model
    // that keeps up on it look unable to (which rule 1 and rule 2's starves hold read).
    JointPartition* partition = &partition_;  // the lambda runs here, under decide_mu_
    const auto at_rate = [&](const ModelDemand& demand, int cpus) {
      const auto envelope = partition->Envelope(demand, cpus);
      const std::optional<RatePlan>* at = envelope.ok() ? &(*envelope)[cpus] : nullptr;
      const double p99 = at && *at ? (*at)->simulated.p99_ms : kInf;
      const double ratio = std::isfinite(p99) && share.reference_ms > 0
                               ? demands[i].weight * p99 / share.reference_ms
                               : kInf;
      return std::make_pair(p99, ratio);
    };
    if (p.rate > 0 && p.current_cpus > 0) {
      const int cpus = std::min(p.current_cpus, total);
      std::tie(p.p99_now_ms, p.ratio_now) = at_rate(demands[i], cpus);
      // Where no plan on the share keeps max_utilization to spare, the share is judged as it
      // runs now, fully busy: a finite p99 where it still serves the rate. That spare is for
      // choosing a share, not for describing the one that serves.
      if (std::isinf(p.p99_now_ms)) {
        ModelDemand busy = demands[i];
        busy.max_utilization = 1;
        std::tie(p.p99_now_ms, p.ratio_now) = at_rate(busy, cpus);
      }
    }
    if (p.rate > 0 && share.cpus > 0) {
      std::tie(p.p99_target_ms, p.ratio_target) = at_rate(demands[i], std::min(share.cpus, total));
    }
    proposal.target[p.name] = share.cpus;
    proposal.plans[p.name] = share.plan;
    proposal.rates[p.name] = demands[i].rate;
    proposal.view.push_back(std::move(p));
  }
  return proposal;
}

std::string NodeController::DecisionJson(int total, const std::vector<ModelDemand>& demands,
                                         const PartitionResult& result,
                                         const std::map<std::string, std::vector<int>>& shares,
                                         const Proposal& proposal,
                                         const PartitionDecision& decision) {
  std::string json = "{\"active\":true,\"cpus\":" + std::to_string(total) +
                     ",\"objective\":{\"worst_ratio\":" + Number(result.worst_ratio) +
                     ",\"ratio_sum\":" + Number(result.ratio_sum) +
                     ",\"all_met\":" + (result.all_met ? "true" : "false") +
                     ",\"spare_cpus\":" + std::to_string(result.spare_cpus) + ",\"reserve\":\"" +
                     std::string(PeakReserveName(result.reserve)) + "\"},\"models\":[";
  for (size_t i = 0; i < proposal.view.size(); ++i) {
    const PartitionModel& p = proposal.view[i];
    const auto current = shares.find(p.name);
    if (i > 0) json += ',';
    json += "{\"name\":";
    AppendJsonString(json, p.name);
    json += ",\"cpus\":" + std::to_string(p.current_cpus) + ",\"share\":\"" +
            (current == shares.end() ? std::string() : FormatCpuList(current->second)) +
            "\",\"target_cpus\":" + std::to_string(p.target_cpus) +
            ",\"plan\":" + PlanJson(proposal.plans.at(p.name)) + ",\"rate\":" + Number(p.rate) +
            ",\"predicted_p99_ms\":" + Number(p.p99_target_ms) +
            ",\"current_p99_ms\":" + Number(p.p99_now_ms) +
            ",\"behind\":" + (p.behind ? "true" : "false") + ",\"rate_held_s\":" +
            (p.rate_age ? Number(static_cast<double>(p.rate_age->count()) / 1e3) : "null") +
            ",\"target_p99_ms\":" + Number(demands[i].p99_target_ms.value_or(kInf)) +
            ",\"ratio\":" + Number(p.ratio_target) + "}";
  }
  json += "],\"decision\":{\"move\":" + std::string(decision.move ? "true" : "false") + ",\"why\":";
  AppendJsonString(json, decision.Why());
  json += ",\"worst_now\":" + Number(decision.worst_now) +
          ",\"worst_target\":" + Number(decision.worst_target) +
          ",\"gain_ms\":" + Number(decision.gain_ms) + ",\"cost_ms\":" + Number(decision.cost_ms) +
          "}";
  return json;
}

std::string NodeController::RatesText(const Proposal& proposal) {
  std::string at;
  for (const PartitionModel& p : proposal.view) at += " " + p.name + "@" + Number(p.rate);
  return at;
}

void NodeController::NoteHold(const PartitionDecision& decision, const Proposal& proposal) {
  // A hold is logged when its reason or target changes, not at every decision.
  const std::string hold = decision.Why() + " " + CountsJson(proposal.target);
  if (hold != last_hold_ && decision.reason != PartitionReason::kNoChange) {
    PACKRAT_LOG(INFO) << "node partition: holding (" << decision.Why() << ") at "
                      << CountsJson(proposal.target) << ", rows/s" << RatesText(proposal);
  }
  last_hold_ = hold;
}

void NodeController::CarryOut(const std::vector<std::shared_ptr<ServedModel>>& models,
                              const Proposal& proposal, const std::vector<int>& pool,
                              const PartitionDecision& decision) {
  std::map<std::string, int> from;
  for (const PartitionModel& p : proposal.view) from[p.name] = p.current_cpus;
  PACKRAT_LOG(INFO) << "node partition: moving CPUs (" << decision.Why()
                    << "): " << CountsJson(from) << " -> " << CountsJson(proposal.target)
                    << ", worst ratio " << decision.worst_now << " -> " << decision.worst_target
                    << ", rows/s" << RatesText(proposal);
  const std::chrono::milliseconds took = Move(models, proposal, pool);
  policy_.MoveDone(options_.clock->Now(), took);
  if (options_.metrics) {
    options_.metrics->partition_moves(std::string(PartitionReasonName(decision.reason)))
        .Increment();
  }
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::string moved = "{\"at_unix_ms\":" + std::to_string(unix_ms) + ",\"why\":";
  AppendJsonString(moved, decision.Why());
  moved += ",\"took_ms\":" + std::to_string(took.count()) + ",\"from\":" + CountsJson(from) +
           ",\"to\":" + CountsJson(proposal.target) + "}";
  MutexLock lock(&mu_);
  last_move_json_ = moved;
  changed_ = true;  // decide again at once: on the new shares (and show them)
}

void NodeController::HoldRestartingShrink(const std::vector<std::shared_ptr<ServedModel>>& models,
                                          const Proposal& proposal,
                                          PartitionDecision* decision) const {
  for (const auto& m : models) {
    const std::optional<std::vector<int>> share = options_.allocator->Share(m->name());
    const int want = proposal.target.at(m->name());
    const std::optional<Plan>& plan = proposal.plans.at(m->name());
    if (!share || static_cast<int>(share->size()) <= want || !plan) continue;
    const std::vector<int> kept = CpusToKeep(*share, want, m->ServingCpus());
    if (!m->ShrinkKeeps(kept, *plan, proposal.rates.at(m->name()))) {
      decision->move = false;
      decision->reason = PartitionReason::kShrinkRestarts;
      decision->model = m->name();
      return;
    }
  }
}

ResizeRequest NodeController::RequestFor(const Proposal& proposal, const std::string& name,
                                         bool at_once) {
  ResizeRequest r;
  r.threads = proposal.target.at(name);
  r.plan = proposal.plans.at(name);
  r.rate = proposal.rates.at(name);
  r.at_once = at_once;
  return r;
}

std::chrono::milliseconds NodeController::Move(
    const std::vector<std::shared_ptr<ServedModel>>& models, const Proposal& proposal,
    const std::vector<int>& pool) {
  const SteadyTime start = std::chrono::steady_clock::now();
  ResourceAllocator* allocator = options_.allocator;
  // 1. Shrink: each loser keeps the CPUs of as many of its runtimes as fit (CpusToKeep).
  std::vector<Resizing> shrinking;
  std::map<std::string, std::vector<int>> before;
  for (const auto& m : models) {
    const std::optional<std::vector<int>> share = allocator->Share(m->name());
    const int want = proposal.target.at(m->name());
    if (!share || static_cast<int>(share->size()) <= want) continue;
    before[m->name()] = *share;
    const std::vector<int> kept = CpusToKeep(*share, want, m->ServingCpus());
    if (Status s = allocator->SetShare(m->name(), kept); !s.ok()) {
      PACKRAT_LOG(ERROR) << "node partition: " << s.message();
      continue;
    }
    shrinking.emplace_back(m, ResizeAsync(m, RequestFor(proposal, m->name(), /*at_once=*/true)));
  }
  // The shrunk models' switches to their own plans run beside the growth (their CPUs are
  // their own): only the shrinks themselves are on the growing models' path.
  std::vector<Resizing> growing;
  for (auto& [m, done] : shrinking) {
    if (Status s = done.get(); !s.ok()) {
      // Its old set still serves on the old share: give the share back.
      PACKRAT_LOG(ERROR) << "node partition: model '" << m->name()
                         << "' could not shrink: " << s.message();
      (void)allocator->SetShare(m->name(), before[m->name()]);
      continue;
    }
    growing.emplace_back(m, ResizeAsync(m, RequestFor(proposal, m->name(), /*at_once=*/false)));
  }
  Grow(models, proposal, pool, &growing);  // 2.
  for (auto& [m, done] : growing) {
    if (Status s = done.get(); !s.ok()) {
      PACKRAT_LOG(ERROR) << "node partition: model '" << m->name()
                         << "' could not switch to its plan: " << s.message();
    }
  }
  for (const auto& m : models) {
    if (metrics::ModelMetrics* mm = m->metrics()) {
      mm->cpus().Set(
          static_cast<double>(allocator->Share(m->name()).value_or(std::vector<int>()).size()));
    }
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

void NodeController::Grow(const std::vector<std::shared_ptr<ServedModel>>& models,
                          const Proposal& proposal, const std::vector<int>& pool,
                          std::vector<Resizing>* growing) {
  ResourceAllocator* allocator = options_.allocator;
  std::set<int> held;
  for (const auto& [name, cpus] : allocator->Shares()) held.insert(cpus.begin(), cpus.end());
  std::vector<int> free;
  for (int cpu : pool) {
    if (!held.count(cpu)) free.push_back(cpu);
  }
  size_t next = 0;
  for (const auto& m : models) {
    std::vector<int> share = allocator->Share(m->name()).value_or(std::vector<int>());
    const int want = proposal.target.at(m->name());
    if (static_cast<int>(share.size()) >= want) continue;
    const size_t need = static_cast<size_t>(want) - share.size();
    if (free.size() - next < need) {
      PACKRAT_LOG(WARNING) << "node partition: only " << free.size() - next
                           << " free CPU(s) for model '" << m->name() << "', which needs " << need;
      continue;
    }
    share.insert(share.end(), free.begin() + static_cast<std::ptrdiff_t>(next),
                 free.begin() + static_cast<std::ptrdiff_t>(next + need));
    next += need;
    if (Status s = allocator->SetShare(m->name(), share); !s.ok()) {
      PACKRAT_LOG(ERROR) << "node partition: " << s.message();
      continue;
    }
    growing->emplace_back(m, ResizeAsync(m, RequestFor(proposal, m->name(), /*at_once=*/false)));
  }
}

std::string NodeController::Json() const {
  MutexLock lock(&mu_);
  return json_;
}

}  // namespace packrat
