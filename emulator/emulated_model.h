// What an emulated runtime knows of its model: the latency of a slice from the model's profile
// L[t,b], and the outputs it answers — zero-filled tensors of the declared row shapes. It
// computes nothing.
//
// A value type; const methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "agent/planning/profile.h"
#include "common/datatype.h"
#include "common/status.h"
#include "shm/layout.h"

namespace packrat::emulator {

// One declared output: its datatype and the shape of one row (a -1 dim is answered as 1).
struct OutputSpec {
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> row_shape;
};

class EmulatedModel {
 public:
  // FailedPrecondition if `profile` has no point at `threads` threads (a plan the profile
  // does not know cannot be emulated); InvalidArgument for an output of no datatype.
  static StatusOr<EmulatedModel> Create(Profile profile, int threads,
                                        std::vector<OutputSpec> outputs);

  // L[threads, rows] at speed 1: the profile's latency, linear between profiled batch sizes,
  // proportional beyond them (Profile::InterpolatedLatency, as the agent's planning reads it).
  std::chrono::nanoseconds Latency(int64_t rows) const;

  // Writes the outputs of a slice of `rows` rows into the output slab [out, out + capacity):
  // each zero-filled, 64-byte aligned, one after the other, and describes them in `done`
  // (tensors, num_tensors). `back(bytes)` is called with the bytes they take before any is
  // written (the slab is sparse shared memory); its error fails the slice. ResourceExhausted
  // when they do not fit.
  Status WriteOutputs(int64_t rows, uint8_t* out, uint64_t capacity,
                      const std::function<Status(uint64_t bytes)>& back,
                      shm::CompletionMessage* done) const;

  int threads() const { return threads_; }
  const Profile& profile() const { return profile_; }

 private:
  EmulatedModel(Profile profile, int threads, std::vector<OutputSpec> outputs)
      : profile_(std::move(profile)), threads_(threads), outputs_(std::move(outputs)) {}

  Profile profile_;
  int threads_;
  std::vector<OutputSpec> outputs_;
};

}  // namespace packrat::emulator
