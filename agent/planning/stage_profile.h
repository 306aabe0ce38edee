// Per-stage running times of a staged model at batch sizes 1..N, measured with one pinned
// runtime of t threads, and what layered batching derives from them (lbci-paper §3.1–3.2):
//
//   t[p,i]   mean time of stage i at batch p, over the runs of p
//   t_p      mean time of the whole batch p (the sum of its stages)
//   r[p,q]   = Σ_{i<=q} t[p,i] / t_p, the share of a batch's time spent in stages 1..q
//   g(b)     per-sample time, the paper's four-parameter fit of t_p / p:
//              g(b) = z2 + (z1 − z2) / (1 + (b / z3)^z4)
//   r_b      mean |t_j − t_p| / t_p over the runs j of batch p: how much runs fluctuate
//   t_OPT    the strict budget: budget / (1 + max_b r_b). (The paper writes t_opt × r_max, which
//            cannot be meant literally; dividing by 1 + r_max leaves the average fluctuation as
//            headroom.)
//   N_opt    the largest b ≤ N with b·g(b) ≤ t_OPT (at least 1)
//
// Immutable after Create(); thread-safe to share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace packrat {

class StageProfile {
 public:
  // One timed run of a batch: its size and the time spent in each stage.
  struct Run {
    int64_t batch = 0;
    std::vector<double> stage_ms;
  };

  // The four parameters of g(b) and how well they fit the measured per-sample times.
  struct Fit {
    double z1 = 0, z2 = 0, z3 = 1, z4 = 1;
    double rms_rel_error = 0;  // root mean square of (g(b) − measured) / measured
    double PerSampleMs(double b) const;
  };

  // Validates `runs` (every batch size 1..N at least once, the same positive number of stages
  // in every run, times >= 0) and derives the tables and the fit.
  static StatusOr<StageProfile> Create(std::vector<Run> runs);

  // CSV: "batch,stage_0_ms,stage_1_ms,..." then one line per run.
  static StatusOr<StageProfile> LoadCsv(const std::string& path);
  static StatusOr<StageProfile> ParseCsv(const std::string& text, const std::string& source);
  std::string ToCsv() const;
  Status WriteCsv(const std::string& path) const;

  int num_stages() const { return num_stages_; }
  int64_t max_batch() const { return max_batch_; }
  const std::vector<Run>& runs() const { return runs_; }
  const Fit& fit() const { return fit_; }

  // Means over the runs; b is clamped to [1, N].
  double StageMs(int64_t b, int stage) const;
  double BatchMs(int64_t b) const;
  // r[p,q] for q = 0 (nothing done, 0) .. num_stages (all done, 1); p clamped to [1, N].
  double Ratio(int64_t p, int q) const;
  // r_b, and its maximum over every measured batch size.
  double Fluctuation(int64_t b) const;
  double MaxFluctuation() const { return max_fluctuation_; }

  // Predicted time of `rows` rows through stages 1..q (from the start): rows·g(rows)·r[rows,q].
  double PredictThroughMs(int64_t rows, int q) const;
  // Predicted time of `rows` rows through stages q+1..x: rows·g(rows)·(1 − r[rows,q]).
  double PredictRestMs(int64_t rows, int q) const;

  // t_OPT and N_opt for a latency budget (milliseconds).
  double StrictBudgetMs(double budget_ms) const { return budget_ms / (1 + max_fluctuation_); }
  int64_t OptimalBatch(double budget_ms) const;

 private:
  StageProfile() = default;

  std::vector<Run> runs_;
  int num_stages_ = 0;
  int64_t max_batch_ = 0;
  std::vector<std::vector<double>> stage_ms_;  // [b-1][stage]
  std::vector<double> batch_ms_;               // [b-1]
  std::vector<double> fluctuation_;            // [b-1]
  double max_fluctuation_ = 0;
  Fit fit_;
};

// Fits g(b) to measured per-sample times y[b-1] (b = 1..y.size()) by Nelder–Mead on the
// relative squared error, from several starting points; deterministic. With fewer than four
// points g is the constant mean.
StageProfile::Fit FitPerSampleTime(const std::vector<double>& per_sample_ms);

}  // namespace packrat
