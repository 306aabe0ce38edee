// Moving a slice's rows between requests and an instance's tensor slabs: the one copy of input
// bytes on the data path (request -> slab) and the one copy of outputs (slab -> request).
#pragma once

#include <cstdint>
#include <vector>

#include "agent/batching/instance_executor.h"
#include "agent/kserve/tensor.h"
#include "common/status.h"

namespace packrat {

// Copies the slice's rows of every input into `slab` (capacity bytes), each input 64-byte
// aligned, and describes the batched tensors in *inputs (data pointing into the slab).
// kResourceExhausted if they do not fit.
Status GatherInputs(const WorkSlice& slice, uint8_t* slab, size_t capacity,
                    std::vector<TensorView>* inputs);

// Delivers rows of `outputs` (the slice's batched outputs) to the slice's requests in order.
void ScatterOutputs(const WorkSlice& slice, const std::vector<TensorView>& outputs);

// Fails every row of the slice with `status`.
void FailSlice(const WorkSlice& slice, const Status& status);

}  // namespace packrat
