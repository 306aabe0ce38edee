// The metrics the Packrat agent exports (docs/operations.md lists them with their meaning):
//
//   packrat_requests_total{model,code}                        counter
//   packrat_request_duration_seconds{model}                   histogram
//   packrat_queue_duration_seconds{model}                     histogram
//   packrat_compute_duration_seconds{model}                   histogram
//   packrat_batch_size_rows{model}                            histogram
//   packrat_inflight_requests{model}                          gauge
//   packrat_queue_rows{model}                                 gauge (callback)
//   packrat_build_info{version}                               gauge  (1)
//   packrat_instances{model,threads,batch,state}              gauge
//   packrat_runtime_isolation{model,isolation}                gauge  (runtimes: cgroup|affinity)
//   packrat_target_batch_rows{model}                          gauge  (B)
//   packrat_estimated_batch_rows{model}                       gauge  (the estimator's value)
//   packrat_reconfigurations_total{model}                     counter
//   packrat_runtime_restarts_total{model}                     counter
//   packrat_reconfiguration_duration_seconds{model}           histogram
//   packrat_instance_generation{model}                        gauge
//   packrat_profile_progress_ratio{model}                     gauge  (profiling done / total)
//   packrat_model_cpus{model}                                 gauge  (its share of the node)
//   packrat_partition_moves_total{reason}                     counter (node partition)
//   packrat_model_kernel{model,kernel,configured}             gauge  (1)
//   packrat_accuracy_max_rel_error{model}                     gauge
//   packrat_accuracy_top1_agreement{model}                    gauge
//   packrat_predicted_batch_latency_seconds{model}            gauge  (the optimizer's plan)
//   packrat_measured_batch_latency_seconds{model}             gauge
//   packrat_topup_queries_total{model,outcome}                counter (layered batching)
//   packrat_topup_rows_total{model}                           counter
//   packrat_topup_predicted_latency_seconds{model}            histogram
//   packrat_layered_optimal_batch_rows{model}                 gauge  (N_opt)
//   packrat_generated_tokens_total{model}                     counter (generative models)
//   packrat_time_to_first_token_seconds{model}                histogram
//   process_*                                                 (process_metrics.h)
//
// Labels are written in name order (prometheus-cpp keeps them in a map): the series
// packrat_instances{model="m",threads="2",batch="4",state="ready"} is exported as
// packrat_instances{batch="4",model="m",state="ready",threads="2"}; PromQL does not care.
//
// Built on prometheus-cpp's core library (Debian's prometheus-cpp-dev): its Registry holds every
// family, its TextSerializer writes the page; the queue-depth callbacks (callback_gauge.h) and
// the process metrics (process_metrics.h) are Collectables collected beside it. Our own Beast
// listener serves the page (no civetweb exposer).
//
// Usage: AgentMetrics::Create() once per agent; ForModel(name) once per model, keeping the
// ModelMetrics reference; then every update on the request path is one atomic operation (a
// histogram's Observe takes its own short lock). Serve Render() at GET /metrics with
// Content-Type kPrometheusContentType. RemoveModel(name) drops a model's series (unload).
//
// Thread-safety: everything is thread-safe. Ownership: AgentMetrics owns the registry and every
// ModelMetrics; references from ForModel live until RemoveModel or the AgentMetrics' end.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/metrics/callback_gauge.h"
#include "agent/metrics/inference_statistics.h"
#include "agent/metrics/process_metrics.h"
#include "agent/metrics/runtime_process_metrics.h"
#include "common/mutex.h"
#include "common/status.h"

namespace packrat::metrics {

using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;
using BucketBounds = std::vector<double>;

// The Content-Type of the Prometheus text exposition format, version 0.0.4.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct AgentMetricsOptions {
  // Bounds of the request, queue and compute duration histograms, in seconds.
  BucketBounds latency_buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                  0.15,   0.25,  0.5,    0.75,  1,    2.5,   5,    10,    30};
  // Bounds of the executed batch size histogram, in rows.
  BucketBounds batch_size_buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  // Exports process_* metrics read from this /proc; empty: no process metrics.
  std::string proc_root = "/proc";
  // packrat_build_info{version} 1.
  std::string version = "unknown";
};

// How many instances of one ⟨threads,batch⟩ are in one state ("starting", "warming", "ready",
// "draining", "failed", ... — free text, used as a label value).
struct InstanceCount {
  int threads = 0;
  int batch = 0;
  std::string state;
  int count = 0;
};

class AgentMetrics;

// The series of one model. All accessors are lock-free except where noted.
class ModelMetrics {
 public:
  ModelMetrics(const ModelMetrics&) = delete;
  ModelMetrics& operator=(const ModelMetrics&) = delete;
  ~ModelMetrics();  // removes every series of the model

  const std::string& model() const { return model_; }

  // Requests answered with HTTP status `code`: Increment() once per response, errors included.
  // The first call per code takes the family's lock; later calls are one atomic load.
  Counter& requests(int code);

  // Observe(seconds) once per request, from receipt to response.
  Histogram& request_duration() { return *request_duration_; }
  // A request accepted (inflight() up) at `received` was answered with HTTP status `code`:
  // inflight() down, requests(code), request_duration() and the statistics' success or fail.
  void Answered(int code, std::chrono::steady_clock::time_point received);
  // A slice of `rows` rows of `requests` requests ran: its input copy, compute and output copy.
  // Into batch_size(), compute_duration() and the statistics.
  void Executed(int64_t rows, int64_t requests, std::chrono::nanoseconds input,
                std::chrono::nanoseconds compute, std::chrono::nanoseconds output);
  // The model's figures for the statistics extension (inference_statistics.h).
  InferenceStatistics& statistics() { return statistics_; }
  // Observe(seconds) once per request: enqueued until its batch was dispatched.
  Histogram& queue_duration() { return *queue_duration_; }
  // Observe(seconds) once per executed batch: dispatched to an instance until its result came
  // back (generative models: once per decode step, the step's time).
  Histogram& compute_duration() { return *compute_duration_; }
  // Observe(rows) once per executed batch (generative models: sequences per decode step).
  Histogram& batch_size() { return *batch_size_; }
  // Increment() when a request is accepted, Decrement() when it is answered.
  Gauge& inflight() { return *inflight_; }
  // Set(B) whenever the target batch changes.
  Gauge& target_batch() { return *target_batch_; }
  // Set(value) whenever the batch-size estimator updates.
  Gauge& estimated_batch() { return *estimated_batch_; }
  // Increment() once per completed reconfiguration.
  Counter& reconfigurations() { return *reconfigurations_; }
  // Increment() once per dead runtime replaced (by a new or a parked runtime).
  Counter& runtime_restarts() { return *runtime_restarts_; }
  // Observe(seconds) per reconfiguration: from the decision until the new set serves.
  Histogram& reconfiguration_duration() { return *reconfiguration_duration_; }
  // Set(N): the generation of the instance set now serving (1 after loading).
  Gauge& generation() { return *generation_; }
  // Set(done / total) while the model's profile is measured (instances: auto); 1 once it is
  // there (measured or stored).
  Gauge& profile_progress() { return *profile_progress_; }
  // CPUs the model's share of the node holds (model repository, node partition); 0: none (it
  // places anywhere).
  Gauge& cpus() { return *cpus_; }
  // Publishes the kernel settings in effect and the accuracy guard's figures from a runtime's
  // load report ("kernel=… max_rel_error=… top1_agreement=… fallback=…"); `configured` is what
  // the config asked for. Takes a lock.
  void SetKernel(const std::string& load_report, const std::string& configured);
  // Set(seconds): the optimizer's predicted latency of a batch under the current plan.
  Gauge& predicted_batch_latency() { return *predicted_batch_latency_; }
  // Set(seconds): the measured latency of recent batches (e.g. a moving average).
  Gauge& measured_batch_latency() { return *measured_batch_latency_; }
  // One batch took `seconds`, arrival of its first slice to its last answer: into the
  // measured_batch_latency gauge, an exponentially weighted average (α = 0.2).
  void RecordBatchLatency(double seconds);

  // Layered batching. Increment() once per top-up query a runtime asked, by its outcome.
  enum class TopUpOutcome { kJoined, kQueueEmpty, kRefused };
  Counter& topup_queries(TopUpOutcome outcome) {
    return *topup_queries_[static_cast<int>(outcome)];
  }
  // Increment(rows) for the rows that joined a running batch.
  Counter& topup_rows() { return *topup_rows_; }
  // Observe(seconds): the predicted completion (lbci eq. 3) of each admitted top-up.
  Histogram& topup_predicted_latency() { return *topup_predicted_latency_; }
  // Set(N_opt): the largest batch the latency budget allows.
  Gauge& layered_optimal_batch() { return *layered_optimal_batch_; }

  // Generative models. Increment() per token generated.
  Counter& generated_tokens() { return *generated_tokens_; }
  // Observe(seconds) per sequence: from its request's arrival to its first token.
  Histogram& time_to_first_token() { return *time_to_first_token_; }

  // Replaces this model's packrat_instances series with `counts` (combinations not listed stop
  // being exported; entries with the same labels add up). Takes locks; call on state changes,
  // not per request.
  void SetInstances(const std::vector<InstanceCount>& counts) EXCLUDES(mu_);
  // packrat_runtime_isolation: how many of the model's runtimes (serving, draining, parked)
  // sit in a cpuset cgroup of their own, and how many are pinned by sched_setaffinity only.
  void SetIsolation(int cgroup, int affinity);

  // Makes `rows` (evaluated at scrape time) the value of packrat_queue_rows for this model; the
  // series lives as long as the handle (see callback_gauge.h for the callback's rules).
  CallbackHandle BindQueueRows(MetricCallback rows);
  // Exports the CPU time and memory of the runtime processes `pids` lists at each scrape
  // (runtime_process_metrics.h), while the handle lives.
  CallbackHandle BindRuntimes(RuntimeProcessMetrics::PidsCallback pids);

 private:
  friend class AgentMetrics;
  ModelMetrics(AgentMetrics* owner, std::string model);
  // One series of `family` for this model, with `labels` beside the model's; remembered so the
  // destructor removes it.
  template <typename T, typename... Args>
  T* Add(prometheus::Family<T>* family, prometheus::Labels labels, Args&&... args);

  static constexpr int kMaxCachedCode = 599;

  AgentMetrics* const owner_;
  const std::string model_;
  InferenceStatistics statistics_;
  // requests(code) for codes 0..kMaxCachedCode, filled on first use (release/acquire).
  std::array<std::atomic<Counter*>, kMaxCachedCode + 1> requests_by_code_{};
  Histogram* request_duration_;
  Histogram* queue_duration_;
  Histogram* compute_duration_;
  Histogram* batch_size_;
  Gauge* inflight_;
  Gauge* target_batch_;
  Gauge* isolation_cgroup_;
  Gauge* isolation_affinity_;
  Gauge* estimated_batch_;
  Counter* reconfigurations_;
  Counter* runtime_restarts_;
  Histogram* reconfiguration_duration_;
  Gauge* generation_;
  Gauge* profile_progress_;
  Gauge* cpus_;
  Gauge* predicted_batch_latency_;
  Gauge* measured_batch_latency_;
  std::atomic<double> batch_latency_average_{0};
  std::array<Counter*, 3> topup_queries_;
  Counter* topup_rows_;
  Histogram* topup_predicted_latency_;
  Gauge* layered_optimal_batch_;
  Counter* generated_tokens_;
  Histogram* time_to_first_token_;

  Mutex mu_;
  // Every series of the model, to remove at the end: the removers of the ones above and of
  // requests(code), kernel and accuracy ones (SetKernel), and instances (SetInstances).
  std::vector<std::function<void()>> removers_ GUARDED_BY(mu_);
  std::map<std::vector<std::string>, Gauge*> instances_ GUARDED_BY(mu_);  // by label values
  std::vector<Gauge*> kernel_series_ GUARDED_BY(mu_);
};

class AgentMetrics {
 public:
  // Registers every family (and the process metrics unless options.proc_root is empty).
  // InvalidArgument for bucket bounds that are not strictly increasing.
  static StatusOr<std::unique_ptr<AgentMetrics>> Create(const AgentMetricsOptions& options = {});
  ~AgentMetrics();

  // The series of `model`, created on first use. Takes a lock: call once per model and keep the
  // reference (valid until RemoveModel(model) or the end of this object).
  ModelMetrics& ForModel(std::string_view model) EXCLUDES(mu_);
  // Drops every series of `model` (an unloaded model); its ModelMetrics reference is invalid
  // afterwards. No-op for an unknown model.
  void RemoveModel(std::string_view model) EXCLUDES(mu_);
  // The node partition moved CPUs between models, for `reason` (PartitionDecision::why).
  // Thread-safe.
  Counter& partition_moves(const std::string& reason);
  // Counted use for models that come and go (model repository): two versions of one model
  // share its series while both live (a reload), and the series go with the last Release.
  // Each AcquireModel must be paired with one ReleaseModel.
  ModelMetrics& AcquireModel(std::string_view model) EXCLUDES(mu_);
  void ReleaseModel(std::string_view model) EXCLUDES(mu_);

  // The /metrics page (Content-Type kPrometheusContentType).
  std::string Render() const;
  // For families beyond the standard set.
  prometheus::Registry& registry() { return registry_; }

 private:
  friend class ModelMetrics;
  explicit AgentMetrics(const AgentMetricsOptions& options);

  const AgentMetricsOptions options_;
  prometheus::Registry registry_;
  prometheus::Family<Counter>* requests_;
  prometheus::Family<Histogram>* request_duration_;
  prometheus::Family<Histogram>* queue_duration_;
  prometheus::Family<Histogram>* compute_duration_;
  prometheus::Family<Histogram>* batch_size_;
  prometheus::Family<Gauge>* inflight_;
  CallbackGauge queue_rows_;
  RuntimeProcessMetrics runtime_processes_;  // exports nothing without proc_root
  prometheus::Family<Gauge>* instances_;
  prometheus::Family<Gauge>* target_batch_;
  prometheus::Family<Gauge>* runtime_isolation_;
  prometheus::Family<Gauge>* estimated_batch_;
  prometheus::Family<Counter>* reconfigurations_;
  prometheus::Family<Counter>* runtime_restarts_;
  prometheus::Family<Histogram>* reconfiguration_duration_;
  prometheus::Family<Gauge>* generation_;
  prometheus::Family<Gauge>* profile_progress_;
  prometheus::Family<Gauge>* model_cpus_;
  prometheus::Family<Counter>* partition_moves_;
  prometheus::Family<Gauge>* kernel_;
  prometheus::Family<Gauge>* accuracy_rel_error_;
  prometheus::Family<Gauge>* accuracy_top1_;
  prometheus::Family<Gauge>* predicted_batch_latency_;
  prometheus::Family<Gauge>* measured_batch_latency_;
  prometheus::Family<Counter>* topup_queries_;
  prometheus::Family<Counter>* topup_rows_;
  prometheus::Family<Histogram>* topup_predicted_latency_;
  prometheus::Family<Gauge>* layered_optimal_batch_;
  prometheus::Family<Counter>* generated_tokens_;
  prometheus::Family<Histogram>* time_to_first_token_;
  std::unique_ptr<ProcessMetrics> process_;  // null without process metrics

  Mutex mu_;
  std::map<std::string, std::unique_ptr<ModelMetrics>, std::less<>> models_ GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> users_ GUARDED_BY(mu_);  // AcquireModel counts
};

}  // namespace packrat::metrics
