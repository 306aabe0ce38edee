#include "agent/metrics/agent_metrics.h"

#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "common/load_report.h"

namespace packrat::metrics {

ModelMetrics::ModelMetrics(const AgentMetrics* owner, std::string model)
    : owner_(owner),
      model_(std::move(model)),
      request_duration_(&owner->request_duration_->WithLabelValues({model_})),
      queue_duration_(&owner->queue_duration_->WithLabelValues({model_})),
      compute_duration_(&owner->compute_duration_->WithLabelValues({model_})),
      batch_size_(&owner->batch_size_->WithLabelValues({model_})),
      inflight_(&owner->inflight_->WithLabelValues({model_})),
      target_batch_(&owner->target_batch_->WithLabelValues({model_})),
      estimated_batch_(&owner->estimated_batch_->WithLabelValues({model_})),
      reconfigurations_(&owner->reconfigurations_->WithLabelValues({model_})),
      runtime_restarts_(&owner->runtime_restarts_->WithLabelValues({model_})),
      reconfiguration_duration_(&owner->reconfiguration_duration_->WithLabelValues({model_})),
      generation_(&owner->generation_->WithLabelValues({model_})),
      predicted_batch_latency_(&owner->predicted_batch_latency_->WithLabelValues({model_})),
      measured_batch_latency_(&owner->measured_batch_latency_->WithLabelValues({model_})),
      topup_queries_{&owner->topup_queries_->WithLabelValues({model_, "joined"}),
                     &owner->topup_queries_->WithLabelValues({model_, "queue_empty"}),
                     &owner->topup_queries_->WithLabelValues({model_, "refused"})},
      topup_rows_(&owner->topup_rows_->WithLabelValues({model_})),
      topup_predicted_latency_(&owner->topup_predicted_latency_->WithLabelValues({model_})),
      layered_optimal_batch_(&owner->layered_optimal_batch_->WithLabelValues({model_})),
      generated_tokens_(&owner->generated_tokens_->WithLabelValues({model_})),
      time_to_first_token_(&owner->time_to_first_token_->WithLabelValues({model_})) {}

Counter& ModelMetrics::requests(int code) {
  const bool cacheable = code >= 0 && code <= kMaxCachedCode;
  if (cacheable) {
    Counter* cached = requests_by_code_[code].load(std::memory_order_acquire);
    if (cached != nullptr) return *cached;
  }
  Counter& counter = owner_->requests_->WithLabelValues({model_, std::to_string(code)});
  // Racing first calls store the same pointer: the family returns one series per label set.
  if (cacheable) requests_by_code_[code].store(&counter, std::memory_order_release);
  return counter;
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
  owner_->kernel_->WithLabelValues({model_, kernel, configured}).Set(1);
  if (checked) {
    owner_->accuracy_rel_error_->WithLabelValues({model_}).Set(rel);
    if (top1 >= 0) owner_->accuracy_top1_->WithLabelValues({model_}).Set(top1);
  }
}

void ModelMetrics::SetInstances(const std::vector<InstanceCount>& counts) {
  std::lock_guard<std::mutex> lock(instances_mu_);
  // Entries with the same labels add up (two draining sets, or parked runtimes, of one shape).
  std::map<LabelValues, int> sums;
  for (const InstanceCount& c : counts) {
    sums[{model_, std::to_string(c.threads), std::to_string(c.batch), c.state}] += c.count;
  }
  std::set<LabelValues> keep;
  for (const auto& [values, count] : sums) {
    owner_->instances_->WithLabelValues(values).Set(count);
    keep.insert(values);
  }
  owner_->instances_->RemoveIf(
      [&](const LabelValues& values) { return values[0] == model_ && keep.count(values) == 0; });
}

CallbackHandle ModelMetrics::BindQueueRows(MetricCallback rows) {
  return owner_->queue_rows_->Bind({model_}, std::move(rows));
}

AgentMetrics::~AgentMetrics() = default;

StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Create(const AgentMetricsOptions& options) {
  std::unique_ptr<AgentMetrics> metrics(new AgentMetrics());
  RETURN_IF_ERROR(metrics->Init(options));
  return metrics;
}

Status AgentMetrics::Init(const AgentMetricsOptions& options) {
  MetricsRegistry& r = registry_;
  const std::vector<std::string> model = {"model"};
  ASSIGN_OR_RETURN(requests_, r.AddCounter({"packrat_requests_total",
                                            "Inference requests answered, by model and HTTP "
                                            "status code.",
                                            {"model", "code"}}));
  ASSIGN_OR_RETURN(
      request_duration_,
      r.AddHistogram({"packrat_request_duration_seconds",
                      "Time from receiving an inference request to answering it.", model},
                     options.latency_buckets));
  ASSIGN_OR_RETURN(queue_duration_,
                   r.AddHistogram({"packrat_queue_duration_seconds",
                                   "Time a request waited in the batcher before its batch was "
                                   "dispatched to the instances.",
                                   model},
                                  options.latency_buckets));
  ASSIGN_OR_RETURN(compute_duration_,
                   r.AddHistogram({"packrat_compute_duration_seconds",
                                   "Time the instances took to execute one batch.", model},
                                  options.latency_buckets));
  ASSIGN_OR_RETURN(batch_size_, r.AddHistogram({"packrat_batch_size_rows",
                                                "Rows in each executed batch.", model},
                                               options.batch_size_buckets));
  ASSIGN_OR_RETURN(inflight_,
                   r.AddGauge({"packrat_inflight_requests",
                               "Inference requests accepted and not yet answered.", model}));
  ASSIGN_OR_RETURN(
      queue_rows_,
      r.AddCallbackGauge({"packrat_queue_rows", "Rows waiting in the batcher's queue.", model}));
  ASSIGN_OR_RETURN(instances_,
                   r.AddGauge({"packrat_instances",
                               "Runtime instances by intra-op threads, batch rows and state.",
                               {"model", "threads", "batch", "state"}}));
  ASSIGN_OR_RETURN(
      target_batch_,
      r.AddGauge({"packrat_target_batch_rows",
                  "The target batch size B the instances are configured for.", model}));
  ASSIGN_OR_RETURN(estimated_batch_,
                   r.AddGauge({"packrat_estimated_batch_rows",
                               "The batch-size estimator's current value; B follows it.", model}));
  ASSIGN_OR_RETURN(reconfigurations_,
                   r.AddCounter({"packrat_reconfigurations_total",
                                 "Completed reconfigurations of the model's instances.", model}));
  ASSIGN_OR_RETURN(runtime_restarts_,
                   r.AddCounter({"packrat_runtime_restarts_total",
                                 "Dead runtimes replaced, by new or parked runtimes.", model}));
  ASSIGN_OR_RETURN(reconfiguration_duration_,
                   r.AddHistogram({"packrat_reconfiguration_duration_seconds",
                                   "Time from a reconfiguration decision until the new instance "
                                   "set serves.",
                                   model},
                                  {0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120}));
  ASSIGN_OR_RETURN(kernel_,
                   r.AddGauge({"packrat_model_kernel",
                               "1 for the kernel settings a model runs with (kernel) and was "
                               "configured for (configured); they differ after an accuracy "
                               "fallback.",
                               {"model", "kernel", "configured"}}));
  ASSIGN_OR_RETURN(
      accuracy_rel_error_,
      r.AddGauge({"packrat_accuracy_max_rel_error",
                  "The accuracy guard's max |optimised - FP32| / max |FP32| at load.", model}));
  ASSIGN_OR_RETURN(accuracy_top1_,
                   r.AddGauge({"packrat_accuracy_top1_agreement",
                               "Share of rows whose argmax the optimised model keeps (classifier "
                               "outputs), from the accuracy guard at load.",
                               model}));
  ASSIGN_OR_RETURN(generation_, r.AddGauge({"packrat_instance_generation",
                                            "Generation of the instance set now serving; +1 per "
                                            "reconfiguration or restart.",
                                            model}));
  ASSIGN_OR_RETURN(
      predicted_batch_latency_,
      r.AddGauge({"packrat_predicted_batch_latency_seconds",
                  "Batch latency the optimizer predicts for the current plan.", model}));
  ASSIGN_OR_RETURN(measured_batch_latency_,
                   r.AddGauge({"packrat_measured_batch_latency_seconds",
                               "Measured latency of recent batches.", model}));
  ASSIGN_OR_RETURN(topup_queries_,
                   r.AddCounter({"packrat_topup_queries_total",
                                 "Layered batching: queries of runtimes at a stage boundary for "
                                 "rows to join their running batch, by outcome (joined, "
                                 "queue_empty, refused: over the latency budget).",
                                 {"model", "outcome"}}));
  ASSIGN_OR_RETURN(topup_rows_,
                   r.AddCounter({"packrat_topup_rows_total",
                                 "Layered batching: rows that joined a running batch.", model}));
  ASSIGN_OR_RETURN(topup_predicted_latency_,
                   r.AddHistogram({"packrat_topup_predicted_latency_seconds",
                                   "Layered batching: predicted completion (wait + done + joining "
                                   "rows + remaining stages) of each admitted top-up.",
                                   model},
                                  options.latency_buckets));
  ASSIGN_OR_RETURN(layered_optimal_batch_,
                   r.AddGauge({"packrat_layered_optimal_batch_rows",
                               "Layered batching: N_opt, the largest batch the latency budget "
                               "allows.",
                               model}));
  ASSIGN_OR_RETURN(generated_tokens_,
                   r.AddCounter({"packrat_generated_tokens_total",
                                 "Generative models: tokens generated.", model}));
  ASSIGN_OR_RETURN(time_to_first_token_,
                   r.AddHistogram({"packrat_time_to_first_token_seconds",
                                   "Generative models: time from a generate request's arrival to "
                                   "its first token.",
                                   model},
                                  options.latency_buckets));
  if (!options.proc_root.empty()) {
    ASSIGN_OR_RETURN(process_,
                     ProcessMetrics::Create(&registry_, ProcessMetricsOptions{options.proc_root}));
  }
  return Status::Ok();
}

ModelMetrics& AgentMetrics::ForModel(std::string_view model) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(model);
  if (it == models_.end()) {
    std::unique_ptr<ModelMetrics> metrics(new ModelMetrics(this, std::string(model)));
    it = models_.emplace(std::string(model), std::move(metrics)).first;
  }
  return *it->second;
}

}  // namespace packrat::metrics
