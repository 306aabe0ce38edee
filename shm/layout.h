// The plain-data layout of one instance's shared-memory segment: the ABI between the agent and
// one packrat-runtime process.
//
//   [SegmentHeader][request ring][completion ring][top-up ring][slot 0: input | output][slot 1]...
//
// Everything in the segment is trivially copyable, addressed by offsets from the segment base
// (never pointers: the two processes map it at different addresses), and 64-byte aligned.
// Bump kLayoutVersion on any change; a runtime refuses a segment of another version.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace packrat::shm {

inline constexpr uint64_t kSegmentMagic = 0x3154415252434150ull;  // "PACRRAT1", little endian
// 2: SegmentHeader::info. 3: layered batching (top-up ring, query completions, stage times).
// 4: generation (GenerateParams, step tokens). 6: CompletionStatus::kUnavailable.
inline constexpr uint32_t kLayoutVersion = 6;
inline constexpr int kMaxTensors = 8;
inline constexpr int kMaxDims = 8;
inline constexpr int kMaxStages = 16;
inline constexpr int kMaxStopIds = 8;
inline constexpr int kMaxStepTokens = 32;
inline constexpr size_t kErrorTextSize = 512;
inline constexpr size_t kAlign = 64;

constexpr size_t AlignUp(size_t n, size_t align = kAlign) {
  return (n + align - 1) / align * align;
}

// One tensor inside a slab. `offset` is from the start of the slab it lives in.
struct TensorDesc {
  uint8_t datatype;  // packrat::DataType
  uint8_t ndim;
  uint8_t reserved[6];
  int64_t shape[kMaxDims];
  uint64_t offset;
  uint64_t byte_size;
};

// BatchMessage::flags.
// Request ring: the runtime of a staged model may ask for more rows at stage boundaries
// (layered batching) while running this batch.
inline constexpr uint32_t kBatchAllowTopUp = 1u << 0;
// Top-up ring: do not ask again for this batch (the budget admits no more rows).
inline constexpr uint32_t kGrantFinal = 1u << 1;
// Request ring of a generative runtime: a new sequence `batch_id`, its prompt (INT64 [L]) being
// tensors[0] in slot `slot`'s input slab and its parameters `generate`.
inline constexpr uint32_t kGenerateStart = 1u << 2;
// Request ring of a generative runtime: stop sequence `batch_id` and free its decode slot.
inline constexpr uint32_t kGenerateCancel = 1u << 3;

// How a sequence is generated.
struct GenerateParams {
  uint32_t max_tokens;  // tokens to generate at most (>= 1)
  uint32_t top_k;       // sample among the k best; 1 = greedy
  float temperature;    // > 0
  uint32_t num_stop_ids;
  uint64_t seed;                  // of the sampler
  int32_t stop_ids[kMaxStopIds];  // generation ends after any of these
};

// Agent -> runtime, on the request ring: run the batch whose inputs are in slot `slot`'s input
// slab. On the top-up ring, the answer to a top-up query: `rows` more rows (0 = none) for the
// running batch `batch_id`, described by `tensors` in the same slot's input slab, after the
// batch's own inputs.
struct BatchMessage {
  uint64_t batch_id;
  uint32_t slot;
  uint32_t num_tensors;
  int64_t rows;
  uint32_t flags;  // kBatchAllowTopUp, kGrantFinal, kGenerateStart, kGenerateCancel
  uint32_t reserved;
  TensorDesc tensors[kMaxTensors];
  GenerateParams generate;  // kGenerateStart
};

// kError: the batch failed (the model threw, outputs of a bad shape); kUnavailable: the runtime
// lacked room for the outputs (shared memory): not the request's fault.
enum class CompletionStatus : int32_t { kOk = 0, kError = 1, kUnavailable = 2 };

enum class CompletionKind : uint32_t {
  kDone = 0,            // the batch finished (status, outputs)
  kTopUpQuery = 1,      // the batch stopped after `stages_done` stages and waits for one answer
                        // on the top-up ring
  kAccepted = 2,        // generation: the runtime took sequence batch_id's prompt; `slot` is free
  kTokens = 3,          // generation: `rows` entries of `tokens`, from one decode step or prefill
  kSequenceFailed = 4,  // generation: sequence batch_id ended with `error`
};

// StepToken::flags.
inline constexpr uint32_t kTokenFinished = 1u << 0;   // the sequence's last token
inline constexpr uint32_t kTokenCancelled = 1u << 1;  // the sequence was cancelled (no token)

// One generated token of one sequence.
struct StepToken {
  uint64_t sequence_id;
  int32_t token;
  uint32_t flags;
  float prob;  // its probability when sampled among the top k; -1 when greedy (not computed)
  uint32_t reserved;
};

// Runtime -> agent. kDone: batch `batch_id` finished; on success its outputs (`rows` rows) are
// in the slot's output slab, described by `tensors`; on error `error` holds a NUL-terminated
// message. kTopUpQuery: see CompletionKind.
struct CompletionMessage {
  uint64_t batch_id;
  uint32_t slot;
  CompletionStatus status;
  uint32_t num_tensors;
  CompletionKind kind;
  uint64_t compute_ns;   // kDone: time computing the batch; kTopUpQuery: so far; kTokens: the
                         // decode step's time (with step_rows)
  int64_t rows;          // rows computed (kDone) or running (kTopUpQuery); kTokens: entries
  int64_t step_rows;     // kTokens: sequences in the decode step timed by compute_ns; 0: none
  uint32_t stages_done;  // kTopUpQuery: stages 1..k have run
  uint32_t num_stages;   // staged models: entries in stage_ns (0 otherwise)
  uint64_t stage_ns[kMaxStages];  // kDone, staged models: time in each stage
  TensorDesc tensors[kMaxTensors];
  StepToken tokens[kMaxStepTokens];  // kTokens
  char error[kErrorTextSize];
};

// Head of a single-producer single-consumer ring. `head` is written only by the producer,
// `tail` only by the consumer; each lives on its own cache line. The two 32-bit sequence words
// are futexes: producers bump `data_seq` after a push, consumers bump `space_seq` after a pop,
// and a side that found the ring empty/full sleeps on the word until it changes.
struct alignas(kAlign) RingHeader {
  alignas(kAlign) std::atomic<uint64_t> head;
  alignas(kAlign) std::atomic<uint64_t> tail;
  alignas(kAlign) std::atomic<uint32_t> data_seq;
  std::atomic<uint32_t> consumer_waiting;
  std::atomic<uint32_t> space_seq;
  std::atomic<uint32_t> producer_waiting;
  std::atomic<uint32_t> closed;  // set by either side on shutdown; wakes every waiter
  uint32_t capacity;             // entries, a power of two
  uint32_t entry_size;
};

enum class RuntimeState : uint32_t {
  kStarting = 0,  // segment created, runtime loading the model
  kReady = 1,     // model loaded and warmed up; the runtime serves the request ring
  kFailed = 2,    // the runtime could not start; `error` says why
  kStopped = 3,   // the runtime left its loop
};

struct alignas(kAlign) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t num_slots;
  uint64_t segment_size;
  uint64_t request_ring_offset;
  uint64_t completion_ring_offset;
  uint64_t topup_ring_offset;
  uint64_t slots_offset;
  uint64_t slot_input_bytes;   // capacity of each slot's input slab
  uint64_t slot_output_bytes;  // capacity of each slot's output slab
  int32_t agent_pid;
  std::atomic<int32_t> runtime_pid;
  std::atomic<uint32_t> state;  // RuntimeState; also a futex word, woken on every change
  // Layered batching: rows waiting in the model's queue, as last published by the agent (a
  // hint: the runtime skips its top-up query at a stage boundary while it reads 0).
  std::atomic<uint32_t> queued_rows_hint;
  // Generative runtimes: the most sequences decoded together, as set by the agent at any time
  // (a plan's share of the decode slots); 0 = every slot. A lower limit takes effect as
  // sequences finish: none is evicted.
  std::atomic<uint32_t> decode_slots_limit;
  char error[kErrorTextSize];  // written by the runtime before state becomes kFailed
  char info[kErrorTextSize];   // written by the runtime before state becomes kReady: what it
                               // loaded (kernel settings, accuracy guard), one line
};

static_assert(std::is_trivially_copyable_v<TensorDesc>);
static_assert(std::is_trivially_copyable_v<BatchMessage>);
static_assert(std::is_trivially_copyable_v<CompletionMessage>);
static_assert(std::is_trivially_copyable_v<GenerateParams>);
static_assert(sizeof(StepToken) == 24);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(TensorDesc) == 88);
static_assert(sizeof(RingHeader) == 3 * kAlign);

}  // namespace packrat::shm
