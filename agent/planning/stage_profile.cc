#include "agent/planning/stage_profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/atomic_file.h"

namespace packrat {
namespace {

using Params = std::array<double, 4>;  // z1, z2, ln z3, ln z4

double Evaluate(const Params& p, double b) {
  const double z3 = std::exp(p[2]), z4 = std::exp(p[3]);
  return p[1] + (p[0] - p[1]) / (1 + std::pow(b / z3, z4));
}

double Loss(const Params& p, const std::vector<double>& y) {
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double e = (Evaluate(p, static_cast<double>(i + 1)) - y[i]) / y[i];
    sum += e * e;
  }
  return std::isfinite(sum) ? sum : 1e300;
}

// Nelder–Mead from `start`; returns the best vertex.
Params Minimize(const Params& start, const std::vector<double>& y) {
  constexpr int kN = 4;
  std::array<Params, kN + 1> v;
  std::array<double, kN + 1> f;
  v[0] = start;
  for (int i = 0; i < kN; ++i) {
    v[i + 1] = start;
    const double step = std::abs(start[i]) > 1e-9 ? 0.25 * std::abs(start[i]) : 0.25;
    v[i + 1][i] += step;
  }
  for (int i = 0; i <= kN; ++i) f[i] = Loss(v[i], y);
  for (int iter = 0; iter < 4000; ++iter) {
    std::array<int, kN + 1> order;
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return f[a] < f[b]; });
    const int best = order[0], worst = order[kN], second = order[kN - 1];
    if (f[worst] - f[best] < 1e-14) break;
    Params centroid{};
    for (int i = 0; i < kN; ++i) {
      for (int d = 0; d < kN; ++d) centroid[d] += v[order[i]][d] / kN;
    }
    auto along = [&](double t) {
      Params p;
      for (int d = 0; d < kN; ++d) p[d] = centroid[d] + t * (v[worst][d] - centroid[d]);
      return p;
    };
    const Params reflected = along(-1);
    const double fr = Loss(reflected, y);
    if (fr < f[best]) {
      const Params expanded = along(-2);
      const double fe = Loss(expanded, y);
      if (fe < fr) {
        v[worst] = expanded, f[worst] = fe;
      } else {
        v[worst] = reflected, f[worst] = fr;
      }
    } else if (fr < f[second]) {
      v[worst] = reflected, f[worst] = fr;
    } else {
      const Params contracted = along(fr < f[worst] ? -0.5 : 0.5);
      const double fc = Loss(contracted, y);
      if (fc < std::min(fr, f[worst])) {
        v[worst] = contracted, f[worst] = fc;
      } else {  // shrink towards the best vertex
        for (int i = 0; i <= kN; ++i) {
          if (i == best) continue;
          for (int d = 0; d < kN; ++d) v[i][d] = v[best][d] + 0.5 * (v[i][d] - v[best][d]);
          f[i] = Loss(v[i], y);
        }
      }
    }
  }
  return v[std::min_element(f.begin(), f.end()) - f.begin()];
}

std::vector<std::string> SplitCommas(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

double StageProfile::Fit::PerSampleMs(double b) const {
  return z2 + (z1 - z2) / (1 + std::pow(b / z3, z4));
}

StageProfile::Fit FitPerSampleTime(const std::vector<double>& y) {
  StageProfile::Fit fit;
  if (y.empty()) return fit;
  const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  Params best{mean, mean, 0, 0};
  if (y.size() >= 4) {
    double best_loss = Loss(best, y);
    const double n = static_cast<double>(y.size());
    for (double z3 : {1.0, 2.0, n / 2}) {
      for (double z4 : {1.0, 2.0}) {
        const Params p = Minimize({y.front(), y.back(), std::log(z3), std::log(z4)}, y);
        const double loss = Loss(p, y);
        if (loss < best_loss) best = p, best_loss = loss;
      }
    }
  }
  fit.z1 = best[0];
  fit.z2 = best[1];
  fit.z3 = std::exp(best[2]);
  fit.z4 = std::exp(best[3]);
  fit.rms_rel_error = std::sqrt(Loss(best, y) / static_cast<double>(y.size()));
  return fit;
}

StatusOr<StageProfile> StageProfile::Create(std::vector<Run> runs) {
  if (runs.empty()) return InvalidArgument("a stage profile needs at least one run");
  StageProfile p;
  p.num_stages_ = static_cast<int>(runs.front().stage_ms.size());
  if (p.num_stages_ < 1) return InvalidArgument("a stage profile needs at least one stage");
  for (const Run& r : runs) {
    if (r.batch < 1) return InvalidArgument("batch sizes start at 1");
    if (static_cast<int>(r.stage_ms.size()) != p.num_stages_) {
      return InvalidArgument("every run needs the same number of stages");
    }
    for (double ms : r.stage_ms) {
      if (!(ms >= 0) || !std::isfinite(ms)) return InvalidArgument("stage times must be >= 0");
    }
    p.max_batch_ = std::max(p.max_batch_, r.batch);
  }
  const size_t n = static_cast<size_t>(p.max_batch_);
  std::vector<std::vector<double>> totals(n);
  p.stage_ms_.assign(n, std::vector<double>(p.num_stages_, 0.0));
  for (const Run& r : runs) {
    for (int i = 0; i < p.num_stages_; ++i) p.stage_ms_[r.batch - 1][i] += r.stage_ms[i];
    totals[r.batch - 1].push_back(std::accumulate(r.stage_ms.begin(), r.stage_ms.end(), 0.0));
  }
  std::vector<double> per_sample(n);
  p.batch_ms_.resize(n);
  p.fluctuation_.resize(n);
  for (size_t b = 0; b < n; ++b) {
    if (totals[b].empty()) {
      return InvalidArgument("batch size " + std::to_string(b + 1) + " was not measured");
    }
    const double runs_of_b = static_cast<double>(totals[b].size());
    for (double& ms : p.stage_ms_[b]) ms /= runs_of_b;
    const double mean = std::accumulate(totals[b].begin(), totals[b].end(), 0.0) / runs_of_b;
    if (!(mean > 0)) return InvalidArgument("batch times must be > 0");
    double deviation = 0;
    for (double t : totals[b]) deviation += std::abs(t - mean) / mean;
    p.batch_ms_[b] = mean;
    p.fluctuation_[b] = deviation / runs_of_b;
    p.max_fluctuation_ = std::max(p.max_fluctuation_, p.fluctuation_[b]);
    per_sample[b] = mean / static_cast<double>(b + 1);
  }
  p.fit_ = FitPerSampleTime(per_sample);
  p.runs_ = std::move(runs);
  return p;
}

double StageProfile::StageMs(int64_t b, int stage) const {
  b = std::clamp<int64_t>(b, 1, max_batch_);
  return stage_ms_[b - 1][std::clamp(stage, 0, num_stages_ - 1)];
}

double StageProfile::BatchMs(int64_t b) const {
  return batch_ms_[std::clamp<int64_t>(b, 1, max_batch_) - 1];
}

double StageProfile::Ratio(int64_t p, int q) const {
  if (q <= 0) return 0;
  if (q >= num_stages_) return 1;
  p = std::clamp<int64_t>(p, 1, max_batch_);
  const std::vector<double>& t = stage_ms_[p - 1];
  return std::accumulate(t.begin(), t.begin() + q, 0.0) / batch_ms_[p - 1];
}

double StageProfile::Fluctuation(int64_t b) const {
  return fluctuation_[std::clamp<int64_t>(b, 1, max_batch_) - 1];
}

double StageProfile::PredictThroughMs(int64_t rows, int q) const {
  if (rows <= 0) return 0;
  return static_cast<double>(rows) * fit_.PerSampleMs(static_cast<double>(rows)) * Ratio(rows, q);
}

double StageProfile::PredictRestMs(int64_t rows, int q) const {
  if (rows <= 0) return 0;
  return static_cast<double>(rows) * fit_.PerSampleMs(static_cast<double>(rows)) *
         (1 - Ratio(rows, q));
}

int64_t StageProfile::OptimalBatch(double budget_ms) const {
  const double strict = StrictBudgetMs(budget_ms);
  int64_t best = 1;
  for (int64_t b = 1; b <= max_batch_; ++b) {
    if (static_cast<double>(b) * fit_.PerSampleMs(static_cast<double>(b)) <= strict) best = b;
  }
  return best;
}

StatusOr<StageProfile> StageProfile::ParseCsv(const std::string& text, const std::string& source) {
  std::stringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(source + ": empty stage profile");
  const std::vector<std::string> header = SplitCommas(line);
  if (header.size() < 2 || header[0] != "batch") {
    return InvalidArgument(source + ": the header must be batch,stage_0_ms,...");
  }
  std::vector<Run> runs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::vector<std::string> cells = SplitCommas(line);
    if (cells.size() != header.size()) {
      return InvalidArgument(source + ":" + std::to_string(number) + ": expected " +
                             std::to_string(header.size()) + " columns");
    }
    Run run;
    char* end = nullptr;
    run.batch = std::strtoll(cells[0].c_str(), &end, 10);
    if (cells[0].empty() || *end != '\0') {
      return InvalidArgument(source + ":" + std::to_string(number) + ": bad batch size");
    }
    for (size_t i = 1; i < cells.size(); ++i) {
      const double ms = std::strtod(cells[i].c_str(), &end);
      if (cells[i].empty() || *end != '\0') {
        return InvalidArgument(source + ":" + std::to_string(number) + ": bad time");
      }
      run.stage_ms.push_back(ms);
    }
    runs.push_back(std::move(run));
  }
  auto profile = Create(std::move(runs));
  if (!profile.ok()) return InvalidArgument(source + ": " + profile.status().message());
  return profile;
}

StatusOr<StageProfile> StageProfile::LoadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read stage profile '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseCsv(text.str(), path);
}

std::string StageProfile::ToCsv() const {
  std::string out = "batch";
  for (int i = 0; i < num_stages_; ++i) out += ",stage_" + std::to_string(i) + "_ms";
  out += '\n';
  char buf[32];
  for (const Run& r : runs_) {
    out += std::to_string(r.batch);
    for (double ms : r.stage_ms) {
      std::snprintf(buf, sizeof(buf), ",%.6g", ms);
      out += buf;
    }
    out += '\n';
  }
  return out;
}

Status StageProfile::WriteCsv(const std::string& path) const {
  return WriteFileAtomically(path, ToCsv());
}

}  // namespace packrat
