#include "emulator/latency_truth.h"

#include <cmath>

namespace packrat::emulator {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit hash of the point's coordinates.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double LognormalSigma(double cv) { return std::sqrt(std::log1p(cv * cv)); }

}  // namespace

double ProfileErrorFactor(uint64_t seed, int threads, int batch, double error) {
  if (error <= 0) return 1;
  const uint64_t h =
      Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(threads)) ^ static_cast<uint64_t>(batch));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return 1 - error + 2 * error * u;
}

Profile PerturbedProfile(const Profile& profile, double error, uint64_t seed) {
  if (error <= 0) return profile;
  Profile out;
  for (ProfilePoint p : profile.points()) {
    const double f = ProfileErrorFactor(seed, p.threads, p.batch, error);
    p.latency_ms *= f;
    if (p.latency_min_ms) *p.latency_min_ms *= f;
    if (p.latency_max_ms) *p.latency_max_ms *= f;
    (void)out.Add(p);  // the same points, scaled by a positive factor: valid
  }
  return out;
}

Jitter::Jitter(double cv, uint64_t seed)
    : rng_(seed),
      factor_(-LognormalSigma(cv) * LognormalSigma(cv) / 2, LognormalSigma(cv)),
      enabled_(cv > 0) {}

double Jitter::Next() { return enabled_ ? factor_(rng_) : 1.0; }

}  // namespace packrat::emulator
