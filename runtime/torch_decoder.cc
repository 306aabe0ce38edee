#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/mman.h>
#include <torch/script.h>

#include <filesystem>
#include <functional>
#include <new>
#include <numeric>

#include "runtime/decoder.h"

namespace packrat::runtime {
namespace {

// A float tensor of zeros in anonymous memory that the kernel commits page by page as it is
// first written: a cache with room for many sequences costs memory only for the positions
// decoded (reads of untouched pages see the shared zero page). Small pages only: with
// transparent huge pages, the warm-up's first touch of each slot would commit 2 MiB of it.
// Throws std::bad_alloc.
at::Tensor LazyZeros(const std::vector<int64_t>& shape) {
  const size_t bytes =
      sizeof(float) * static_cast<size_t>(std::accumulate(shape.begin(), shape.end(), int64_t{1},
                                                          std::multiplies<int64_t>()));
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  madvise(memory, bytes, MADV_NOHUGEPAGE);  // advice: a failure costs only memory
  return torch::from_blob(
      memory, shape, [bytes](void* p) { munmap(p, bytes); }, at::kFloat);
}

class TorchDecoder : public Decoder {
 public:
  TorchDecoder(torch::jit::Module module, DecoderShape shape, int slots)
      : module_(std::move(module)), shape_(shape), slots_(slots) {
    const std::vector<int64_t> cache = {shape.layers, slots, shape.max_len, shape.heads,
                                        shape.head_dim};
    cache_k_ = LazyZeros(cache);
    cache_v_ = LazyZeros(cache);
    if (module_.hasattr("lm_bias")) {
      bias_ = module_.attr("lm_bias").toTensor().detach().to(at::kFloat).contiguous();
    }
    prefill_ = std::make_unique<torch::jit::Method>(module_.get_method("prefill"));
    step_ = std::make_unique<torch::jit::Method>(module_.get_method("step"));
  }

  const DecoderShape& shape() const override { return shape_; }
  int slots() const override { return slots_; }
  const float* bias() const override { return bias_.defined() ? bias_.data_ptr<float>() : nullptr; }

  StatusOr<const float*> Prefill(const int64_t* ids, int64_t n, int slot) override {
    if (n < 1 || n >= shape_.max_len) {
      return InvalidArgument("a prompt needs 1 to " + std::to_string(shape_.max_len - 1) +
                             " tokens, got " + std::to_string(n));
    }
    if (slot < 0 || slot >= slots_) return InvalidArgument("bad cache slot");
    try {
      c10::InferenceMode guard;
      at::Tensor prompt = torch::from_blob(const_cast<int64_t*>(ids), {n}, at::kLong);
      logits_ = (*prefill_)({prompt, cache_k_, cache_v_, static_cast<int64_t>(slot)})
                    .toTensor()
                    .to(at::kFloat)
                    .contiguous();
    } catch (const std::exception& e) {
      return Internal(std::string("prefill failed: ") + e.what());
    }
    return logits_.data_ptr<float>();
  }

  StatusOr<const float*> Step(const int64_t* tokens, const int64_t* positions, int count) override {
    if (count < 1 || count > slots_) return InvalidArgument("bad step size");
    try {
      c10::InferenceMode guard;
      at::Tensor t = torch::from_blob(const_cast<int64_t*>(tokens), {count}, at::kLong);
      at::Tensor p = torch::from_blob(const_cast<int64_t*>(positions), {count}, at::kLong);
      logits_ = (*step_)({t, p, cache_k_, cache_v_}).toTensor().to(at::kFloat).contiguous();
    } catch (const std::exception& e) {
      return Internal(std::string("decode step failed: ") + e.what());
    }
    return logits_.data_ptr<float>();
  }

  void MoveSlot(int from, int to, int64_t length) override {
    c10::InferenceMode guard;
    length = std::min(length, shape_.max_len);
    using torch::indexing::Slice;
    cache_k_.select(1, to).slice(1, 0, length).copy_(cache_k_.select(1, from).slice(1, 0, length));
    cache_v_.select(1, to).slice(1, 0, length).copy_(cache_v_.select(1, from).slice(1, 0, length));
  }

 private:
  torch::jit::Module module_;
  const DecoderShape shape_;
  const int slots_;
  // [layers, slots, max_len, heads, head_dim], allocated once (LazyZeros).
  at::Tensor cache_k_, cache_v_;
  at::Tensor bias_;
  at::Tensor logits_;
  std::unique_ptr<torch::jit::Method> prefill_, step_;
};

}  // namespace

StatusOr<std::unique_ptr<Decoder>> LoadTorchDecoder(const std::string& model_path, int threads,
                                                    int slots) {
  if (!std::filesystem::exists(model_path)) {
    return NotFound("model file '" + model_path + "' does not exist");
  }
  if (slots < 1) return InvalidArgument("a decoder needs at least one slot");
  at::set_num_threads(threads);
  torch::jit::Module module;
  DecoderShape shape;
  try {
    module = torch::jit::load(model_path, torch::kCPU);
    module.eval();
    for (const char* method : {"config", "prefill", "step"}) {
      if (!module.find_method(method)) {
        return InvalidArgument("'" + model_path + "' is not a generative model: it has no " +
                               method + "() method (see docs/configuration.md)");
      }
    }
    const std::vector<int64_t> c = module.get_method("config")({}).toIntVector();
    if (c.size() != 5 || c[0] < 1 || c[1] < 1 || c[2] < 1 || c[3] < 2 || c[4] < 1) {
      return InvalidArgument("'" + model_path +
                             "': config() must return [layers, heads, head_dim, max_len, vocab]");
    }
    shape = {static_cast<int>(c[0]), static_cast<int>(c[1]), static_cast<int>(c[2]), c[3], c[4]};
  } catch (const c10::Error& e) {
    return InvalidArgument("cannot load TorchScript model '" + model_path +
                           "': " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgument("cannot load TorchScript model '" + model_path + "': " + e.what());
  }
  std::unique_ptr<Decoder> decoder;
  try {
    decoder = std::make_unique<TorchDecoder>(std::move(module), shape, slots);
  } catch (const std::exception& e) {
    return Internal(std::string("cannot set up the decoder: ") + e.what());
  }
  // Warm-up: a prefill into every slot, then a step at every count, so that the graph executor
  // has specialised before serving.
  std::vector<int64_t> ids = {1, 2, 3}, tokens(slots, 1), positions(slots, 3);
  for (int s = 0; s < slots; ++s) RETURN_IF_ERROR(decoder->Prefill(ids.data(), 3, s).status());
  for (int n = 1; n <= slots; ++n) {
    RETURN_IF_ERROR(decoder->Step(tokens.data(), positions.data(), n).status());
  }
  return decoder;
}

}  // namespace packrat::runtime
