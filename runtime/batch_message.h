// Turning a BatchMessage from the request ring into input tensors over the slot's input slab,
// and the common parts of the CompletionMessage a runtime answers it with. Everything in the
// message comes from another process and is checked before use. Torch-free (the fuzz target
// links it without libtorch; the emulator shares it).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "runtime/model_runner.h"
#include "shm/layout.h"

namespace packrat::runtime {

// `slab(slot)` is the input slab of slot `slot` < num_slots, `capacity` bytes long. On success
// `inputs` holds one tensor per message tensor, pointing into that slab; InvalidArgument names
// the first thing wrong (slot, tensor count, rank, datatype, shape, or bytes outside the slab).
Status UnpackBatchMessage(const shm::BatchMessage& msg, uint32_t num_slots, uint64_t capacity,
                          const std::function<uint8_t*(uint32_t)>& slab,
                          std::vector<RawTensor>* inputs);

// Starts `done` as the answer to `msg`: kDone, with no tensors, rows, stages, time or error yet
// (the rest is left for the runtime to fill).
void BeginCompletion(const shm::BatchMessage& msg, shm::CompletionMessage* done);

// Ends `done` as failed with `status` (not OK): kUnavailable where its code is, kError
// otherwise; no tensors; its message, cut to the error field, as the error. Logs a warning
// naming the batch.
void FailCompletion(const Status& status, shm::CompletionMessage* done);

}  // namespace packrat::runtime
