// Poisson noise: the one test every policy uses to tell a change of the load from chance.
//
// Rows arriving at a steady rate r are counted over s seconds as a Poisson variable of mean
// m = r·s, whose standard deviation is √m. A count is taken as evidence of another rate only
// where it lies more than k such deviations from m. The deviation is floored at one row: at
// an idle model's rate a count of 2 against 1 expected is no evidence.
//
// Limits: requests of k rows each spread √k times more than single rows; callers with many-row
// requests should ask for more sigmas.
//
// Pure functions; any thread.
#pragma once

#include <algorithm>
#include <cmath>

namespace packrat {

// The standard deviation of a Poisson count of mean `expected`, at least one row.
inline double PoissonSd(double expected) { return std::sqrt(std::max(expected, 1.0)); }

// Whether `count` lies more than `sigmas` deviations above `expected`.
inline bool AbovePoissonNoise(double count, double expected, double sigmas) {
  return count > expected + sigmas * PoissonSd(expected);
}

// Whether `count` lies more than `sigmas` deviations from `expected`, either way.
inline bool BeyondPoissonNoise(double count, double expected, double sigmas) {
  return std::abs(count - expected) > sigmas * PoissonSd(expected);
}

// The rate `rate` rows/s measured over `span_s` seconds, less `sigmas` deviations of its count:
// the lowest rate the measurement supports with that confidence (may be <= 0).
inline double PoissonRateFloor(double rate, double span_s, double sigmas) {
  const double s = std::max(span_s, 1e-3);
  return rate - sigmas * std::sqrt(std::max(rate * s, 0.0)) / s;
}

}  // namespace packrat
