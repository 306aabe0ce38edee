// How an emulated model's latencies differ from the profile the agent plans on: the truth a
// policy must hold up against, which it is never told (issue "Adaptive serving that holds
// where it was never tuned"). Three departures, each off by default:
//
//   * another profile altogether (`emulate.truth`; the runtime is simply given it);
//   * a profile error: every point ⟨t,b⟩ of the truth scaled by its own factor, uniform in
//     [1 − e, 1 + e] and fixed by (seed, t, b) alone, so every runtime of a model, started at
//     any time, lasts the same truth (PerturbedProfile);
//   * service-time jitter: each slice's latency times a lognormal factor of mean 1 and a given
//     coefficient of variation (Jitter), drawn per slice.
//
// Busy neighbours' cost (emulate.neighbour_slowdown) is the contention model's (contention.h).
//
// Pure functions and a value type. Jitter is not thread-safe (one per worker thread).
#pragma once

#include <cstdint>
#include <random>

#include "agent/planning/profile.h"

namespace packrat::emulator {

// The factor point ⟨threads, batch⟩ is scaled by for a profile error `error` in [0, 1):
// uniform in [1 − error, 1 + error], a function of (seed, threads, batch) only.
double ProfileErrorFactor(uint64_t seed, int threads, int batch, double error);

// `profile` with every point's latencies (mean, min, max) scaled by ProfileErrorFactor.
// `error` 0 returns it unchanged.
Profile PerturbedProfile(const Profile& profile, double error, uint64_t seed);

// Lognormal factors of mean 1 and coefficient of variation `cv` (σ² = ln(1 + cv²),
// μ = −σ²/2); `cv` 0 always gives 1.
class Jitter {
 public:
  Jitter(double cv, uint64_t seed);
  double Next();

 private:
  std::mt19937_64 rng_;
  std::lognormal_distribution<double> factor_;
  bool enabled_;
};

}  // namespace packrat::emulator
