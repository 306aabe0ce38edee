// Moving a slice's rows between requests and an instance's tensor slabs: the one copy of input
// bytes on the data path (request -> slab) and the one copy of outputs (slab -> request).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "agent/batching/instance_executor.h"
#include "agent/kserve/tensor.h"
#include "common/status.h"

namespace packrat {

// Every tensor in a slab starts at a multiple of this (shm::kAlign: the runtime's layout).
inline constexpr uint64_t kSlabAlign = 64;

// Bytes of a slab for `rows` rows of every tensor of `specs`, as runtimes size theirs: each
// tensor 64-byte aligned, plus one alignment gap per tensor for rows that join a running slice
// (layered batching). A tensor whose row size varies (a -1 beyond the batch dim) gets
// `variable_bytes`, whatever `rows`.
uint64_t SlabBytes(const std::vector<TensorSpec>& specs, int64_t rows, uint64_t variable_bytes);

// Bytes of one row of `input` (a request's input: shape[0] rows).
uint64_t RowBytesOf(const TensorView& input);

// The most rows shaped like `request`'s whose inputs GatherInputs fits in `capacity` bytes;
// 0 when not even one row fits. Requests that are CompatibleWith each other fit alike.
int64_t RowsThatFit(const InferenceRequest& request, uint64_t capacity);

// kOutOfRange (413) when not even one row of `request` fits an input slab of `smallest_slab`
// bytes (0: every row fits), naming each input's row size, `model` and `variable_bytes`
// (batching.variable_tensor_bytes) in the message.
Status CheckRowFits(const InferenceRequest& request, uint64_t smallest_slab, std::string_view model,
                    int64_t variable_bytes);

// Bytes from the slab's start to the end of the slice's last input as GatherInputs lays them
// out (each input 64-byte aligned).
uint64_t SliceInputBytes(const WorkSlice& slice);

// Copies the slice's rows of every input into `slab` (capacity bytes), each input 64-byte
// aligned, and describes the batched tensors in *inputs (data pointing into the slab).
// kOutOfRange if they do not fit (RowsThatFit tells beforehand).
Status GatherInputs(const WorkSlice& slice, uint8_t* slab, size_t capacity,
                    std::vector<TensorView>* inputs);

// One slice per range of `slice` (per request, as the dispatcher cuts them), in order; the
// original on_done runs once, after the last of them is done.
std::vector<WorkSlice> SplitByRange(WorkSlice slice);

// Delivers rows of `outputs` (the slice's batched outputs) to the slice's requests in order:
// copies every request's rows, calls `copied` (if set), then counts the rows in, which answers
// the requests whose rows are all in.
void ScatterOutputs(const WorkSlice& slice, const std::vector<TensorView>& outputs,
                    const std::function<void()>& copied = nullptr);

// Fails every row of the slice with `status`.
void FailSlice(const WorkSlice& slice, const Status& status);

}  // namespace packrat
