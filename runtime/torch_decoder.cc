#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/mman.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <limits>
#include <new>
#include <numeric>
#include <sstream>
#include <vector>

#include "common/logging.h"
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
    if (logits_.numel() < shape_.vocab) return WrongLogits("prefill", logits_.numel(), 1);
    return logits_.data_ptr<float>();
  }

  // Runs the step padded to padded_count_[count] (TunePadding): the slots past `count` are
  // free (the active sequences are compacted into 0..count-1), so their rows are fillers,
  // token 0 at position 0, whose cache writes the prefill of a later sequence overwrites and
  // whose logits nobody reads.
  StatusOr<const float*> Step(const int64_t* tokens, const int64_t* positions, int count) override {
    if (count < 1 || count > slots_) return InvalidArgument("bad step size");
    const int padded = padded_count_.empty() ? count : padded_count_[count];
    try {
      c10::InferenceMode guard;
      at::Tensor t = at::zeros({padded}, at::kLong);
      at::Tensor p = at::zeros({padded}, at::kLong);
      std::copy(tokens, tokens + count, t.data_ptr<int64_t>());
      std::copy(positions, positions + count, p.data_ptr<int64_t>());
      logits_ = (*step_)({t, p, cache_k_, cache_v_}).toTensor().to(at::kFloat).contiguous();
    } catch (const std::exception& e) {
      return Internal(std::string("decode step failed: ") + e.what());
    }
    if (logits_.numel() < int64_t{count} * shape_.vocab) {
      return WrongLogits("step", logits_.numel(), count);
    }
    return logits_.data_ptr<float>();
  }

  // Times a step at every count (the best of `rounds`) and pads each count to the larger one
  // whose step is fastest, where that is at least kPaddingGain faster: a step's time is far
  // from monotone in its rows (the GEMM kernels favour some sizes; GPT-2-like on two threads:
  // 161 ms for 12 sequences, 97 ms for 16). Returns the timings (ms, index = count). Call once
  // the graph executor has specialised for every count.
  StatusOr<std::vector<double>> TunePadding(int rounds) {
    std::vector<double> ms(slots_ + 1, std::numeric_limits<double>::infinity());
    std::vector<int64_t> tokens(slots_, 1), positions(slots_, 3);
    padded_count_.clear();  // time each count as it is
    for (int round = 0; round < rounds; ++round) {
      for (int n = 1; n <= slots_; ++n) {
        const auto start = std::chrono::steady_clock::now();
        RETURN_IF_ERROR(Step(tokens.data(), positions.data(), n).status());
        ms[n] = std::min(ms[n], std::chrono::duration<double, std::milli>(
                                    std::chrono::steady_clock::now() - start)
                                    .count());
      }
    }
    padded_count_.assign(slots_ + 1, 0);
    for (int n = 1; n <= slots_; ++n) {
      int best = n;
      for (int m = n + 1; m <= slots_; ++m) {
        if (ms[m] < ms[best]) best = m;
      }
      padded_count_[n] = ms[best] < (1 - kPaddingGain) * ms[n] ? best : n;
    }
    return ms;
  }

  // Steps of each count run as steps of padded_count()[count] (identity before TunePadding).
  const std::vector<int>& padded_count() const { return padded_count_; }
  void PadToSlots() { padded_count_.assign(slots_ + 1, slots_); }

  void MoveSlot(int from, int to, int64_t length) override {
    c10::InferenceMode guard;
    length = std::min(length, shape_.max_len);
    using torch::indexing::Slice;
    cache_k_.select(1, to).slice(1, 0, length).copy_(cache_k_.select(1, from).slice(1, 0, length));
    cache_v_.select(1, to).slice(1, 0, length).copy_(cache_v_.select(1, from).slice(1, 0, length));
  }

 private:
  // The sampler reads `rows` × vocab logits: fewer would be read past their end.
  Status WrongLogits(const char* what, int64_t got, int64_t rows) const {
    return Internal(std::string(what) + " returned " + std::to_string(got) + " logits for " +
                    std::to_string(rows) + " sequence(s); config() says the vocabulary has " +
                    std::to_string(shape_.vocab));
  }
  torch::jit::Module module_;
  const DecoderShape shape_;
  const int slots_;
  // [layers, slots, max_len, heads, head_dim], allocated once (LazyZeros).
  at::Tensor cache_k_, cache_v_;
  at::Tensor bias_;
  at::Tensor logits_;
  std::unique_ptr<torch::jit::Method> prefill_, step_;
  static constexpr double kPaddingGain = 0.1;
  std::vector<int> padded_count_;  // [count] -> the count a step runs at; empty: as it is
};

}  // namespace

StatusOr<std::unique_ptr<Decoder>> LoadTorchDecoder(const std::string& model_path, int threads,
                                                    int slots, StepPadding padding) {
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
    if (module.hasattr("lm_bias")) {
      const int64_t bias = module.attr("lm_bias").toTensor().numel();
      if (bias != shape.vocab) {
        return InvalidArgument("'" + model_path + "': lm_bias has " + std::to_string(bias) +
                               " elements; config() says the vocabulary has " +
                               std::to_string(shape.vocab));
      }
    }
  } catch (const c10::Error& e) {
    return InvalidArgument("cannot load TorchScript model '" + model_path +
                           "': " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgument("cannot load TorchScript model '" + model_path + "': " + e.what());
  }
  std::unique_ptr<TorchDecoder> decoder;
  try {
    decoder = std::make_unique<TorchDecoder>(std::move(module), shape, slots);
  } catch (const std::exception& e) {
    return Internal(std::string("cannot set up the decoder: ") + e.what());
  }
  // Warm-up: a prefill into every slot, then a step at every count, so that the graph executor
  // has specialised before serving; then the steps are timed for padding.
  if (padding == StepPadding::kToSlots) decoder->PadToSlots();
  std::vector<int64_t> ids = {1, 2, 3}, tokens(slots, 1), positions(slots, 3);
  for (int s = 0; s < slots; ++s) RETURN_IF_ERROR(decoder->Prefill(ids.data(), 3, s).status());
  for (int n = 1; n <= slots; ++n) {
    RETURN_IF_ERROR(decoder->Step(tokens.data(), positions.data(), n).status());
  }
  if (padding != StepPadding::kTuned) return std::unique_ptr<Decoder>(std::move(decoder));
  ASSIGN_OR_RETURN(std::vector<double> ms, decoder->TunePadding(/*rounds=*/2));
  std::ostringstream padded;
  for (int n = 1; n <= slots; ++n) {
    const int m = decoder->padded_count()[n];
    if (m == n) continue;
    padded << (padded.tellp() > 0 ? ", " : "") << n << " as " << m << " (" << std::fixed
           << std::setprecision(1) << ms[n] << " -> " << ms[m] << " ms)";
  }
  if (padded.tellp() > 0) PACKRAT_LOG(INFO) << "decode steps padded: " << padded.str();
  return std::unique_ptr<Decoder>(std::move(decoder));
}

}  // namespace packrat::runtime
