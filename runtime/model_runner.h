// Runs one TorchScript model in this process. The only seam between Packrat and libtorch: this
// header is torch-free so that the rest of the runtime (and tests) compile without torch headers.
//
// Thread-safety: Run() and Warmup() may not be called concurrently on one ModelRunner.
// Intra-op parallelism is process-wide (at::set_num_threads), set once by Create().
#pragma once

#include <cstddef>
#include <cstdint>
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

struct ModelRunnerOptions {
  std::string model_path;
  int threads = 1;  // intra-op threads
  // Declared output datatypes, in output order; outputs of another type are converted.
  // kInvalid (or a shorter list) keeps the model's own type.
  std::vector<DataType> output_types;
};

class ModelRunner {
 public:
  // Loads the TorchScript file in eval + inference mode. Errors: kNotFound (no file),
  // kInvalidArgument (not a TorchScript module), kInternal (any other libtorch failure).
  static StatusOr<std::unique_ptr<ModelRunner>> Create(const ModelRunnerOptions& options);
  ~ModelRunner();

  // Runs forward() on `inputs`, which are wrapped without copying. Writes each output,
  // contiguous and 64-byte aligned, into [out, out + out_capacity) and describes it in
  // *outputs (data pointing into `out`). Errors: kInvalidArgument when forward() throws (the
  // model rejected its inputs), kResourceExhausted when the outputs do not fit. Never throws.
  Status Run(const std::vector<RawTensor>& inputs, uint8_t* out, size_t out_capacity,
             std::vector<RawTensor>* outputs);

  // Runs `iterations` forward passes on zero inputs for each batch size, so that the graph
  // executor has specialised and the allocator is warm before serving.
  Status Warmup(const std::vector<InputSpec>& inputs, const std::vector<int64_t>& batch_sizes,
                int iterations);

 private:
  struct Impl;
  explicit ModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat::runtime
