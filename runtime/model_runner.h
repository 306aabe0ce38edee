// Runs one TorchScript model in this process. The only seam between Packrat and libtorch: this
// header is torch-free so that the rest of the runtime (and tests) compile without torch headers.
//
// Thread-safety: Run() and Warmup() may not be called concurrently on one ModelRunner.
// Intra-op parallelism is process-wide (at::set_num_threads), set once by Create().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/datatype.h"
#include "common/status.h"

namespace packrat::runtime {

// A tensor's bytes owned by someone else (a shared-memory slab, a test buffer), row-major.
struct RawTensor {
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t byte_size = 0;
};

// One declared input: datatype and the shape of one batch row (a -1 dim is filled with 1 for
// warm-up).
struct InputSpec {
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> row_shape;
};

// How the model is optimised at load (applied to the user's FP32 TorchScript file as is).
struct Optimization {
  bool bf16 = false;           // weights and floating-point inputs in bfloat16
  bool channels_last = false;  // 4-D weights and inputs in NHWC
  bool freeze = false;         // torch::jit::freeze + optimize_for_inference
  bool any() const { return bf16 || channels_last || freeze; }
  std::string Key() const;  // "fp32", "bf16+cl+frozen" (as the agent's KernelSettings)
};

// Compares the optimised model with the FP32 original on `samples` seeded random inputs at
// load (floats ~ N(0,1), integers in [0, 100)).
struct AccuracyGuard {
  int samples = 0;                  // 0 = no check
  double max_rel_error = 0.05;      // max |opt − fp32| / max |fp32|, over every output
  double min_top1_agreement = 0.9;  // for 2-D floating outputs with > 1 column
  bool strict = false;              // beyond tolerance: Create() fails; else FP32 is used
};

// What Create() loaded, for the agent (one line in the segment) and the logs.
struct LoadReport {
  std::string kernel = "fp32";  // the settings in effect (FP32 after a fallback)
  bool checked = false;         // the guard ran
  double max_abs_error = 0;
  double max_rel_error = 0;
  double top1_agreement = -1;  // < 0: no classifier-like output
  bool fallback = false;       // the optimised model was beyond tolerance: serving FP32
  // "kernel=bf16+cl checked=1 max_abs_error=… max_rel_error=… top1_agreement=… fallback=0"
  std::string ToString() const;
};

struct ModelRunnerOptions {
  std::string model_path;
  int threads = 1;  // intra-op threads
  // Declared output datatypes, in output order; outputs of another type are converted.
  // kInvalid (or a shorter list) keeps the model's own type.
  std::vector<DataType> output_types;
  Optimization optimization;
  AccuracyGuard guard;
  std::vector<InputSpec> inputs;  // declared inputs: needed by the guard (random samples)
};

class ModelRunner {
 public:
  // Loads the TorchScript file in eval + inference mode. Errors: kNotFound (no file),
  // kInvalidArgument (not a TorchScript module), kInternal (any other libtorch failure).
  // With an optimisation, the guard (if samples > 0 and inputs are declared) runs before
  // Create returns: beyond tolerance it fails with kFailedPrecondition when strict, or keeps the
  // FP32 module (report().fallback) with a warning in the log.
  static StatusOr<std::unique_ptr<ModelRunner>> Create(const ModelRunnerOptions& options);
  ~ModelRunner();

  const LoadReport& report() const;

  // Runs forward() on `inputs`, which are wrapped without copying. Writes each output,
  // contiguous and 64-byte aligned, into [out, out + out_capacity) and describes it in
  // *outputs (data pointing into `out`). Errors: kInvalidArgument when forward() throws (the
  // model rejected its inputs), kResourceExhausted when the outputs do not fit. Never throws.
  Status Run(const std::vector<RawTensor>& inputs, uint8_t* out, size_t out_capacity,
             std::vector<RawTensor>* outputs);

  // Runs `iterations` forward passes on zero inputs for each batch size, so that the graph
  // executor has specialised and the allocator is warm before serving. Staged models run
  // stage by stage, as they will be served.
  Status Warmup(const std::vector<InputSpec>& inputs, const std::vector<int64_t>& batch_sizes,
                int iterations);

  // --- Staged models (layered batching, lbci-paper §3.4) ---
  // A staged model is an ordinary TorchScript module whose forward() runs the submodules of its
  // `stages` ModuleList (stages.0, stages.1, ...) in order, each taking and returning one
  // tensor (the last may return a tuple). scripts/make_models.py writes such files.
  //
  // Number of stages; 0 for a model that is not staged.
  int num_stages() const;
  // Starts a batch: wraps `inputs` (one tensor; no copy) as the running batch. The tensor must
  // stay valid until the first RunStage() returns.
  Status Begin(const std::vector<RawTensor>& inputs);
  // Runs the next stage (0, 1, ...) on the running batch.
  Status RunStage();
  // Stages run so far on the running batch.
  int stages_done() const;
  // Layered top-up: runs stages 0..stages_done()-1 on `inputs` (new rows; valid until this
  // returns) and appends the result to the running batch, which continues with all its rows.
  Status Join(const std::vector<RawTensor>& inputs);
  // Rows of the running batch.
  int64_t running_rows() const;
  // After the last stage: writes the outputs as Run() does and ends the batch.
  Status Finish(uint8_t* out, size_t out_capacity, std::vector<RawTensor>* outputs);

  // Called by Run() and Finish() with `out` and the bytes from it the outputs are about to take,
  // before any is written; an error fails the batch with it. For memory that must be backed
  // first (a sparse shared-memory slab). Empty (the default): nothing is called.
  void set_output_backing(std::function<Status(uint8_t* out, size_t bytes)> back);

 private:
  struct Impl;
  explicit ModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat::runtime
