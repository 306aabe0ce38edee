#include "agent/metrics/agent_metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cassert>
#include <sstream>
#include <utility>

#include "common/load_report.h"

namespace packrat::metrics {
namespace {

// prometheus-cpp 1.0.1 writes HELP text as it is, unescaped: a backslash or a newline in it would
// break the page, so none of ours holds one.
template <typename T>
prometheus::Family<T>* Register(prometheus::Registry& registry, std::string_view name,
                                std::string_view help) {
  assert(help.find_first_of("\\\n") == std::string_view::npos);
  return &prometheus::detail::Builder<T>()
              .Name(std::string(name))
              .Help(std::string(help))
              .Register(registry);
}

Status CheckBuckets(const BucketBounds& bounds, const char* what) {
  if (bounds.empty()) return InvalidArgument(std::string(what) + " has no bounds");
  for (size_t i = 1; i < bounds.size(); ++i) {
    if (!(bounds[i - 1] < bounds[i])) {
      return InvalidArgument(std::string(what) + " bounds must be strictly increasing");
    }
  }
  return Status::Ok();
}

const BucketBounds kReconfigurationBuckets = {0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120};

}  // namespace

template <typename T, typename... Args>
T* ModelMetrics::Add(prometheus::Family<T>* family, prometheus::Labels labels, Args&&... args) {
  labels.emplace("model", model_);
  T* series = &family->Add(labels, std::forward<Args>(args)...);
  MutexLock lock(&mu_);
  removers_.push_back([family, series] { family->Remove(series); });
  return series;
}

ModelMetrics::ModelMetrics(AgentMetrics* owner, std::string model)
    : owner_(owner), model_(std::move(model)) {
  const BucketBounds& latency = owner->options_.latency_buckets;
  request_duration_ = Add(owner->request_duration_, {}, latency);
  queue_duration_ = Add(owner->queue_duration_, {}, latency);
  compute_duration_ = Add(owner->compute_duration_, {}, latency);
  batch_size_ = Add(owner->batch_size_, {}, owner->options_.batch_size_buckets);
  inflight_ = Add(owner->inflight_, {});
  target_batch_ = Add(owner->target_batch_, {});
  isolation_cgroup_ = Add(owner->runtime_isolation_, {{"isolation", "cgroup"}});
  isolation_affinity_ = Add(owner->runtime_isolation_, {{"isolation", "affinity"}});
  estimated_batch_ = Add(owner->estimated_batch_, {});
  reconfigurations_ = Add(owner->reconfigurations_, {});
  runtime_restarts_ = Add(owner->runtime_restarts_, {});
  reconfiguration_duration_ = Add(owner->reconfiguration_duration_, {}, kReconfigurationBuckets);
  generation_ = Add(owner->generation_, {});
  profile_progress_ = Add(owner->profile_progress_, {});
  cpus_ = Add(owner->model_cpus_, {});
  predicted_batch_latency_ = Add(owner->predicted_batch_latency_, {});
  measured_batch_latency_ = Add(owner->measured_batch_latency_, {});
  topup_queries_ = {Add(owner->topup_queries_, {{"outcome", "joined"}}),
                    Add(owner->topup_queries_, {{"outcome", "queue_empty"}}),
                    Add(owner->topup_queries_, {{"outcome", "refused"}})};
  topup_rows_ = Add(owner->topup_rows_, {});
  topup_predicted_latency_ = Add(owner->topup_predicted_latency_, {}, latency);
  layered_optimal_batch_ = Add(owner->layered_optimal_batch_, {});
  generated_tokens_ = Add(owner->generated_tokens_, {});
  time_to_first_token_ = Add(owner->time_to_first_token_, {}, latency);
}

ModelMetrics::~ModelMetrics() {
  MutexLock lock(&mu_);
  for (const auto& remove : removers_) remove();
  for (const auto& [labels, gauge] : instances_) owner_->instances_->Remove(gauge);
}

Counter& ModelMetrics::requests(int code) {
  const bool cacheable = code >= 0 && code <= kMaxCachedCode;
  if (cacheable) {
    Counter* cached = requests_by_code_[code].load(std::memory_order_acquire);
    if (cached != nullptr) return *cached;
  }
  // Racing first calls add the same series: Family::Add returns the existing one.
  Counter* counter = Add(owner_->requests_, {{"code", std::to_string(code)}});
  if (cacheable) requests_by_code_[code].store(counter, std::memory_order_release);
  return *counter;
}

void ModelMetrics::Answered(int code, std::chrono::steady_clock::time_point received) {
  const std::chrono::steady_clock::duration took = std::chrono::steady_clock::now() - received;
  inflight_->Decrement();
  requests(code).Increment();
  request_duration_->Observe(std::chrono::duration<double>(took).count());
  statistics_.RecordAnswer(code == 200, took);
}

void ModelMetrics::Executed(int64_t rows, int64_t requests, std::chrono::nanoseconds input,
                            std::chrono::nanoseconds compute, std::chrono::nanoseconds output) {
  batch_size_->Observe(static_cast<double>(rows));
  compute_duration_->Observe(std::chrono::duration<double>(compute).count());
  statistics_.RecordExecution(rows, requests, input, compute, output);
}

void ModelMetrics::RecordBatchLatency(double seconds) {
  double old = batch_latency_average_.load(std::memory_order_relaxed);
  double next;
  do {
    next = old == 0 ? seconds : 0.8 * old + 0.2 * seconds;
  } while (!batch_latency_average_.compare_exchange_weak(old, next));
  measured_batch_latency_->Set(next);
}

void ModelMetrics::SetKernel(const std::string& load_report, const std::string& configured) {
  const LoadReport report = LoadReport::Parse(load_report);
  const std::string kernel = std::string(report.Get("kernel").value_or(configured));
  const bool checked = report.Int("checked") == 1;
  const double rel = report.Number("max_rel_error", -1);
  const double top1 = report.Number("top1_agreement", -1);
  Gauge* in_effect = Add(owner_->kernel_, {{"kernel", kernel}, {"configured", configured}});
  in_effect->Set(1);
  if (checked) {
    Add(owner_->accuracy_rel_error_, {})->Set(rel);
    if (top1 >= 0) Add(owner_->accuracy_top1_, {})->Set(top1);
  }
}

void ModelMetrics::SetInstances(const std::vector<InstanceCount>& counts) {
  // Entries with the same labels add up (two draining sets, or parked runtimes, of one shape).
  std::map<std::vector<std::string>, int> sums;
  for (const InstanceCount& c : counts) {
    sums[{std::to_string(c.threads), std::to_string(c.batch), c.state}] += c.count;
  }
  MutexLock lock(&mu_);
  for (auto it = instances_.begin(); it != instances_.end();) {
    if (sums.count(it->first) == 0) {
      owner_->instances_->Remove(it->second);
      it = instances_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [values, n] : sums) {
    Gauge*& gauge = instances_[values];
    if (gauge == nullptr) {
      gauge = &owner_->instances_->Add(
          {{"model", model_}, {"threads", values[0]}, {"batch", values[1]}, {"state", values[2]}});
    }
    gauge->Set(n);
  }
}

void ModelMetrics::SetIsolation(int cgroup, int affinity) {
  isolation_cgroup_->Set(cgroup);
  isolation_affinity_->Set(affinity);
}

CallbackHandle ModelMetrics::BindQueueRows(MetricCallback rows) {
  return owner_->queue_rows_.Bind({{"model", model_}}, std::move(rows));
}

CallbackHandle ModelMetrics::BindRuntimes(RuntimeProcessMetrics::PidsCallback pids) {
  return owner_->runtime_processes_.Bind(model_, std::move(pids));
}

StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Create(const AgentMetricsOptions& options) {
  RETURN_IF_ERROR(CheckBuckets(options.latency_buckets, "latency_buckets"));
  RETURN_IF_ERROR(CheckBuckets(options.batch_size_buckets, "batch_size_buckets"));
  return std::unique_ptr<AgentMetrics>(new AgentMetrics(options));
}

AgentMetrics::AgentMetrics(const AgentMetricsOptions& options)
    : options_(options),
      queue_rows_("packrat_queue_rows", "Rows waiting in the batcher's queue."),
      runtime_processes_(options.proc_root) {
  prometheus::Registry& r = registry_;
  Register<Gauge>(r, "packrat_build_info", "1, labelled with the agent's version.")
      ->Add({{"version", options.version}})
      .Set(1);
  requests_ = Register<Counter>(r, "packrat_requests_total",
                                "Inference requests answered, by model and HTTP status code.");
  request_duration_ =
      Register<Histogram>(r, "packrat_request_duration_seconds",
                          "Time from receiving an inference request to answering it.");
  queue_duration_ = Register<Histogram>(
      r, "packrat_queue_duration_seconds",
      "Time a request waited in the batcher before its batch was dispatched to the instances.");
  compute_duration_ = Register<Histogram>(r, "packrat_compute_duration_seconds",
                                          "Time the instances took to execute one batch.");
  batch_size_ = Register<Histogram>(r, "packrat_batch_size_rows", "Rows in each executed batch.");
  inflight_ = Register<Gauge>(r, "packrat_inflight_requests",
                              "Inference requests accepted and not yet answered.");
  instances_ = Register<Gauge>(r, "packrat_instances",
                               "Runtime instances by intra-op threads, batch rows and state.");
  runtime_isolation_ = Register<Gauge>(
      r, "packrat_runtime_isolation",
      "Runtimes in a cpuset cgroup of their own (cgroup) or pinned by sched_setaffinity only "
      "(affinity).");
  target_batch_ = Register<Gauge>(r, "packrat_target_batch_rows",
                                  "The target batch size B the instances are configured for.");
  estimated_batch_ = Register<Gauge>(r, "packrat_estimated_batch_rows",
                                     "The batch-size estimator's current value; B follows it.");
  reconfigurations_ = Register<Counter>(r, "packrat_reconfigurations_total",
                                        "Completed reconfigurations of the model's instances.");
  runtime_restarts_ = Register<Counter>(r, "packrat_runtime_restarts_total",
                                        "Dead runtimes replaced, by new or parked runtimes.");
  reconfiguration_duration_ = Register<Histogram>(
      r, "packrat_reconfiguration_duration_seconds",
      "Time from a reconfiguration decision until the new instance set serves.");
  kernel_ = Register<Gauge>(r, "packrat_model_kernel",
                            "1 for the kernel settings a model runs with (kernel) and was "
                            "configured for (configured); they differ after an accuracy "
                            "fallback.");
  accuracy_rel_error_ =
      Register<Gauge>(r, "packrat_accuracy_max_rel_error",
                      "The accuracy guard's max |optimised - FP32| / max |FP32| at load.");
  accuracy_top1_ = Register<Gauge>(r, "packrat_accuracy_top1_agreement",
                                   "Share of rows whose argmax the optimised model keeps "
                                   "(classifier outputs), from the accuracy guard at load.");
  generation_ = Register<Gauge>(
      r, "packrat_instance_generation",
      "Generation of the instance set now serving; +1 per reconfiguration or restart.");
  profile_progress_ = Register<Gauge>(
      r, "packrat_profile_progress_ratio",
      "Share of the model's latency profile measured (instances: auto); 1 once it is there.");
  model_cpus_ = Register<Gauge>(r, "packrat_model_cpus",
                                "CPUs in the model's share of the node (repository, partition); "
                                "0: it places anywhere.");
  partition_moves_ = Register<Counter>(r, "packrat_partition_moves_total",
                                       "Moves of CPUs between models by the node partition.");
  predicted_batch_latency_ =
      Register<Gauge>(r, "packrat_predicted_batch_latency_seconds",
                      "Batch latency the optimizer predicts for the current plan.");
  measured_batch_latency_ = Register<Gauge>(r, "packrat_measured_batch_latency_seconds",
                                            "Measured latency of recent batches.");
  topup_queries_ = Register<Counter>(
      r, "packrat_topup_queries_total",
      "Layered batching: queries of runtimes at a stage boundary for rows to join their running "
      "batch, by outcome (joined, queue_empty, refused: over the latency budget).");
  topup_rows_ = Register<Counter>(r, "packrat_topup_rows_total",
                                  "Layered batching: rows that joined a running batch.");
  topup_predicted_latency_ = Register<Histogram>(
      r, "packrat_topup_predicted_latency_seconds",
      "Layered batching: predicted completion (wait + done + joining rows + remaining stages) "
      "of each admitted top-up.");
  layered_optimal_batch_ =
      Register<Gauge>(r, "packrat_layered_optimal_batch_rows",
                      "Layered batching: N_opt, the largest batch the latency budget allows.");
  generated_tokens_ = Register<Counter>(r, "packrat_generated_tokens_total",
                                        "Generative models: tokens generated.");
  time_to_first_token_ = Register<Histogram>(
      r, "packrat_time_to_first_token_seconds",
      "Generative models: time from a generate request's arrival to its first token.");
  if (!options.proc_root.empty()) {
    process_ = std::make_unique<ProcessMetrics>(ProcessMetricsOptions{options.proc_root});
  }
}

AgentMetrics::~AgentMetrics() {
  MutexLock lock(&mu_);
  models_.clear();  // their series go before the families
}

ModelMetrics& AgentMetrics::ForModel(std::string_view model) {
  MutexLock lock(&mu_);
  auto it = models_.find(model);
  if (it == models_.end()) {
    std::unique_ptr<ModelMetrics> metrics(new ModelMetrics(this, std::string(model)));
    it = models_.emplace(std::string(model), std::move(metrics)).first;
  }
  return *it->second;
}

Counter& AgentMetrics::partition_moves(const std::string& reason) {
  return partition_moves_->Add({{"reason", reason}});
}

ModelMetrics& AgentMetrics::AcquireModel(std::string_view model) {
  MutexLock lock(&mu_);
  ++users_[std::string(model)];
  auto it = models_.find(model);
  if (it == models_.end()) {
    std::unique_ptr<ModelMetrics> metrics(new ModelMetrics(this, std::string(model)));
    it = models_.emplace(std::string(model), std::move(metrics)).first;
  }
  return *it->second;
}

void AgentMetrics::ReleaseModel(std::string_view model) {
  std::unique_ptr<ModelMetrics> gone;  // destroyed outside the lock, as in RemoveModel
  MutexLock lock(&mu_);
  auto users = users_.find(model);
  if (users == users_.end() || --users->second > 0) return;
  users_.erase(users);
  if (auto it = models_.find(model); it != models_.end()) {
    gone = std::move(it->second);
    models_.erase(it);
  }
}

void AgentMetrics::RemoveModel(std::string_view model) {
  std::unique_ptr<ModelMetrics> gone;
  {
    MutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end()) return;
    gone = std::move(it->second);
    models_.erase(it);
  }
}

std::string AgentMetrics::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (const prometheus::Collectable* extra :
       {static_cast<const prometheus::Collectable*>(&queue_rows_),
        static_cast<const prometheus::Collectable*>(&runtime_processes_),
        static_cast<const prometheus::Collectable*>(process_.get())}) {
    if (extra == nullptr) continue;
    std::vector<prometheus::MetricFamily> more = extra->Collect();
    std::move(more.begin(), more.end(), std::back_inserter(families));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace packrat::metrics
