#include "agent/planning/loaded_latency.h"

#include <algorithm>
#include <cmath>

namespace packrat {

int64_t LoadedBatchRows(double rate, int64_t b, const std::function<double(int64_t)>& latency_ms) {
  int64_t n = std::max<int64_t>(1, b);
  while (n > 1) {  // n falls strictly, so at most b rounds
    const double arriving = std::ceil(std::max(0.0, rate) * latency_ms(n) / 1e3);
    const int64_t next = std::max<int64_t>(1, static_cast<int64_t>(std::min<double>(arriving, b)));
    if (next >= n) break;
    n = next;
  }
  return n;
}

double LoadedLatencyMs(const Plan& plan, const Profile& profile, double rate,
                       const std::function<double(int threads)>& slowdown) {
  const int64_t b = std::max(1, plan.batch);
  const auto latency_ms = [&](int64_t rows) {
    double latency = 0;
    for (const InstanceGroup& g : plan.groups) {
      const int64_t share = std::max<int64_t>(1, (rows * g.batch + b - 1) / b);
      const double profiled =
          profile.InterpolatedLatency(g.threads, share).value_or(plan.latency_ms);
      latency = std::max(latency, profiled * slowdown(g.threads));
    }
    return latency;
  };
  return latency_ms(LoadedBatchRows(rate, b, latency_ms));
}

}  // namespace packrat
