// Measures single-instance latency L[t,b] of a model with real pinned packrat-runtime
// processes (packrat-paper.txt §3.2).
//
// For each thread count t it starts one runtime pinned to t cores, then for each batch size b
// sends batches of b synthetic rows through the same shared-memory path serving uses, discards
// warm-up batches, and times batches until the mean is known to ±target_rel_error (95%
// confidence), or max_iterations / max_seconds_per_point is reached. For a generative model
// L[t,b] is one decode step with b sequences (next-token choice included): b sequences are
// decoded together by a decode runtime with t threads, and the steps with all b active count. One
// runtime per t serves every b (its slab is sized for the largest); that is the same pinned process
// a ⟨t,b⟩ instance would be, started once instead of once per b.
//
// The paper times each instance alone. Thin instances are served side by side, though, and share
// the memory bandwidth and last-level cache: on our 2-core machine two 1-thread instances ran
// each batch ~10% slower than one did alone, enough to make the optimizer pick two thin
// instances where the fat one was faster. So by default (`neighbours`) a model's ⟨t,b⟩ is
// timed with ⌊cores/t⌋−1 more runtimes of t threads on the following cores, each running
// batches of b back to back (a decoder's: decoding b sequences through every timed step): the
// load the plan ⟨⌊cores/t⌋,t,b⟩ puts on the machine. Decode steps are bound by memory
// bandwidth, so alone they flattered thin decoders more: GPT-2-like ⟨2,1,8⟩ profiled 94 ms
// a step alone and was 0.86× fat at B = 16 side by side.
//
// Thread-safety: one Run() at a time. Blocking: Run() takes as long as the measurements.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/kserve/kserve_codec.h"
#include "agent/planning/profile.h"
#include "agent/pool/process_launcher.h"
#include "agent/pool/runtime_instance.h"
#include "common/status.h"

namespace packrat {

struct ProfilerOptions {
  ModelConfig model;  // the model's path, inputs and outputs are used
  std::string runtime_path;
  std::vector<int> threads;  // thread counts to profile
  std::vector<int> batches;  // batch sizes to profile
  std::vector<int> cores;    // usable cores; an instance of t threads gets the first t
  // Time points next to busy neighbours (see above); false: alone, as in the paper.
  bool neighbours = true;
  double target_rel_error = 0.02;
  int warmup_iterations = 3;
  int min_iterations = 5;
  int max_iterations = 200;
  std::chrono::duration<double> max_seconds_per_point{20.0};
};

struct ProfileProgress {
  int done = 0;  // points measured, including those already in the profile
  int total = 0;
  int threads = 0;
  int batch = 0;
  double latency_ms = 0;
  double rel_error = 0;  // half-width of the 95% interval / mean
  int iterations = 0;
  double elapsed_s = 0;  // since Run() started
  double eta_s = 0;      // estimate for the remaining points
};

class PointMeter;  // profiler.cc

class Profiler {
 public:
  // `launcher` is not owned.
  Profiler(ProfilerOptions options, ProcessLauncher* launcher);

  // Measures every ⟨t,b⟩ of the options that `profile` lacks (so a partial profile resumes),
  // adding each point to *profile and calling `checkpoint` after each (to persist it) and
  // `progress` (may be empty). Stops at the first error.
  Status Run(Profile* profile, const std::function<Status(const Profile&)>& checkpoint,
             const std::function<void(const ProfileProgress&)>& progress);

 private:
  // A runtime for `threads` threads (slabs or decode slots for `max_batch`) and the way its
  // points are timed: batches, or decode steps for a generative model.
  StatusOr<std::unique_ptr<PointMeter>> StartMeter(int threads, int max_batch);

  ProfilerOptions options_;
  ProcessLauncher* launcher_;
};

// Half-width of the 95% confidence interval of the mean of `ms`, relative to the mean (1 for
// fewer than two values).
double RelativeError(const std::vector<double>& ms);
// "neighbours", "alone", or (decoders) "decode-steps-neighbours" or "decode-steps": how `options`
// times its points, for the profile's key.
std::string ProfileLoad(const ProfilerOptions& options);
// One request of `rows` synthetic rows (normal floats, zero integers) matching `inputs`.
StatusOr<DecodedRequest> SyntheticRequest(const std::vector<TensorSpec>& inputs, int rows);
// Runs one batch of `decoded` on `instance` and returns its wall time in ms.
StatusOr<double> TimeOneBatch(RuntimeInstance* instance, const DecodedRequest& decoded);

// "1-4" -> {1,2,3,4}; "1,2,8" -> {1,2,8}; "1-4,8" -> {1,2,3,4,8}. kInvalidArgument otherwise.
StatusOr<std::vector<int>> ParseIntRanges(const std::string& text);
// {1,2,4,...} up to and including `max` (and `max` itself if not a power of two).
std::vector<int> PowersOfTwoUpTo(int max);

}  // namespace packrat
