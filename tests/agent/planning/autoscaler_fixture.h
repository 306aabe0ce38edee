// The autoscaler tests' fixture: made-up profiles, and a model driven as its control thread
// drives it (a load sample every period, Decide() on it, Applied() for each move carried out),
// on hand-made time.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "agent/planning/autoscaler.h"
#include "gtest/gtest.h"
#include "tests/support/latency_tables.h"

namespace packrat {

using SteadyTime = Autoscaler::SteadyTime;
using LatencyFn = std::function<std::optional<double>(int threads, int batch)>;

constexpr int64_t kPeriodMs = 10;

// A profile of threads 1..max_threads × batch 1, 2, 4, ..., max_batch from `latency`.
inline Profile MakeProfile(int max_threads, int max_batch, const LatencyFn& latency) {
  Profile p;
  for (int t = 1; t <= max_threads; ++t) {
    for (int b = 1; b <= max_batch; b *= 2) {
      if (const std::optional<double> ms = latency(t, b)) {
        ProfilePoint point;
        point.threads = t;
        point.batch = b;
        point.latency_ms = *ms;
        EXPECT_TRUE(p.Add(point).ok());
      }
    }
  }
  return p;
}

// One thread: 10, 10, 13.3 and 20 rows/s at b = 1, 2, 4, 8.
inline std::optional<double> SlowLatency(int, int batch) {
  switch (batch) {
    case 1:
      return 100.0;
    case 2:
      return 200.0;
    case 4:
      return 300.0;
    case 8:
      return 400.0;
    default:
      return std::nullopt;
  }
}

// One thread: 60 ms + 80 ms a row; two: 80 ms + 40 ms a row but 240 ms at b = 2. B = 1 runs on
// two threads (120 ms); for B = 8 two one-thread instances (⟨2,1,4⟩, 380 ms) beat one
// two-thread instance (⟨1,2,8⟩, 400 ms) by 5%, within a 10% restart margin.
inline std::optional<double> MarginLatency(int threads, int batch) {
  if (threads == 2 && batch == 2) return 240.0;
  return threads == 1 ? 60.0 + 80.0 * batch : 80.0 + 40.0 * batch;
}

// Two threads are 10% faster per row than one.
inline std::optional<double> ThinAtModerateRates(int threads, int batch) {
  return (threads == 1 ? 100.0 : 90.0) * batch;
}

using packrat::testing::FatAtLowRates;  // tests/support/latency_tables.h

inline BatchSizeEstimator::Options EstimatorOptions(int64_t max_batch) {
  BatchSizeEstimator::Options o;
  o.alpha = 0.2;
  o.window = 100;
  o.sample_period = std::chrono::milliseconds(kPeriodMs);
  o.reconfiguration_timeout = std::chrono::milliseconds(1000);
  o.max_batch = max_batch;
  return o;
}

class AutoscalerTest : public ::testing::Test {
 protected:
  // A model of `threads` threads and batching.max_batch 8 on `latency`, with the settings of
  // the reconfiguration integration tests: 10 ms samples, a decision every second over 100
  // samples, a 200-ms overload window and no step down for 10 minutes after an overload move.
  void SetUpModel(int threads, const LatencyFn& latency,
                  const std::function<void(AutoscalerOptions*)>& tweak = nullptr) {
    optimizer_ = std::make_unique<Optimizer>(MakeProfile(threads, 8, latency));
    AutoscalerOptions o;
    o.threads = threads;
    o.max_batch = 8;
    o.resizable_runtimes = true;
    o.window = 100;
    o.sample_period_ms = kPeriodMs;
    o.overload_window_ms = 200;
    o.scale_down_delay_ms = 600'000;
    if (tweak) tweak(&o);
    autoscaler_ = std::make_unique<Autoscaler>(o, optimizer_.get());
    load_ = std::make_unique<LoadTracker>(EstimatorOptions(8), std::chrono::milliseconds(700'000));
  }

  // Serves the optimizer's plan for B = `b`.
  void Serve(int64_t b) { ServePlan(*optimizer_->Solve(autoscaler_->options().threads, b)); }
  // Its thread counts count as measured from now on (as SlowdownTracker's would once served).
  void ServePlan(const Plan& plan) {
    for (const InstanceGroup& g : plan.groups) served_threads_.insert(g.threads);
    view_.measured = [this](int threads) { return served_threads_.count(threads) > 0; };
    view_.batch = plan.batch;
    view_.groups = plan.groups;
    view_.plan_latency_ms = plan.latency_ms;
    view_.backlog_batch = autoscaler_->BacklogRows(plan.groups, plan.batch, nullptr);
    view_.adaptive = true;
  }

  // One sample period: `depth` rows in the system, rows arriving at `rate` rows/s; then, if the
  // sample was taken, the policy's decision. Moves are carried out (the view serves their plan)
  // unless `carry_out` is false.
  Decision Tick(int64_t depth, double rate, bool carry_out = true) {
    now_ += std::chrono::milliseconds(kPeriodMs);
    owed_ += rate * kPeriodMs / 1000.0;
    const auto whole = static_cast<int64_t>(std::floor(owed_));
    arrived_ += whole;
    owed_ -= static_cast<double>(whole);
    if (!load_->Sample(now_, depth, arrived_)) return {};
    Decision d = autoscaler_->Decide(view_, *load_, now_);
    if (d.move && carry_out) {
      if (d.restart_arrivals) load_->arrivals().Restart();
      ServePlan(d.move->plan);
      autoscaler_->Applied(*d.move, true, now_, *load_);
    }
    return d;
  }

  // Ticks until a decision moves or holds by `rule` (at most `ticks` periods); that decision.
  std::optional<Decision> TickUntil(Rule rule, int64_t depth, double rate, int ticks = 1000) {
    for (int i = 0; i < ticks; ++i) {
      Decision d = Tick(depth, rate);
      if ((d.move && d.move->reason.rule == rule) || (d.hold && d.hold->rule == rule)) return d;
    }
    return std::nullopt;
  }
  // Ticks `ticks` periods; the first move, if any.
  std::optional<Move> FirstMove(int64_t depth, double rate, int ticks) {
    for (int i = 0; i < ticks; ++i) {
      Decision d = Tick(depth, rate);
      if (d.move) return d.move;
    }
    return std::nullopt;
  }

  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Autoscaler> autoscaler_;
  std::unique_ptr<LoadTracker> load_;
  ServingView view_;
  std::set<int> served_threads_;
  SteadyTime now_ = SteadyTime{} + std::chrono::hours(1);
  int64_t arrived_ = 0;
  double owed_ = 0;
};

}  // namespace packrat
