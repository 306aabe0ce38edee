// The fused output kernel (output_kernel.h) against ATen's ops for the same work: bias add,
// softmax, top-k — at vocabulary sizes V and batch sizes B, one thread, logits already computed
// (the matrix product is the same either way and left out, as in the amun paper's Table 3).
//
//   output_kernel_bench [--vocab 32000,50257] [--batch 1,4,16,64] [--k 1,5] [--ms 300]
//
// Prints a Markdown table: the median time per call of each, and the ratio. Both compute the
// same results (ids and probabilities); the last columns are the kernel's greedy mode (k = 1
// without probabilities: no exponentials at all) against the same ATen ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/output_kernel.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> Ints(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoll(item.c_str()));
  return out;
}

// Median microseconds of `fn` over repetitions filling about `ms` milliseconds.
double MedianMicros(const std::function<void()>& fn, double ms) {
  fn();  // warm
  std::vector<double> times;
  const auto stop = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (Clock::now() < stop || times.size() < 5) {
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> vocabs = {32000, 50257}, batches = {1, 4, 16, 64}, ks = {1, 5};
  double ms = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--vocab") vocabs = Ints(value);
    if (flag == "--batch") batches = Ints(value);
    if (flag == "--k") ks = Ints(value);
    if (flag == "--ms") ms = std::atof(value.c_str());
  }
  at::set_num_threads(1);
  std::printf(
      "| V | B | k | ATen bias+softmax+topk µs | fused µs | speedup | fused greedy µs (k=1, "
      "no probs) | speedup |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t v : vocabs) {
    for (int64_t b : batches) {
      for (int64_t k : ks) {
        const at::Tensor logits = at::randn({b, v}) * 3;
        const at::Tensor bias = at::randn({v});
        std::vector<int32_t> ids(b * k);
        std::vector<float> probs(b * k);
        const double aten = MedianMicros(
            [&] {
              const at::Tensor p = at::softmax(logits + bias, 1);
              const auto top = at::topk(p, k, 1);
              (void)top;
            },
            ms);
        const double fused = MedianMicros(
            [&] {
              packrat::runtime::FusedBiasSoftmaxTopKRows(
                  logits.data_ptr<float>(), bias.data_ptr<float>(), b, v, 1.0f, static_cast<int>(k),
                  ids.data(), probs.data());
            },
            ms);
        std::string greedy = "–", greedy_ratio = "–";
        if (k == 1) {
          const double g = MedianMicros(
              [&] {
                packrat::runtime::FusedBiasSoftmaxTopKRows(logits.data_ptr<float>(),
                                                           bias.data_ptr<float>(), b, v, 1.0f, 1,
                                                           ids.data(), nullptr);
              },
              ms);
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%.1f", g);
          greedy = buf;
          std::snprintf(buf, sizeof(buf), "%.1f×", aten / g);
          greedy_ratio = buf;
        }
        std::printf("| %lld | %lld | %lld | %.1f | %.1f | %.1f× | %s | %s |\n",
                    static_cast<long long>(v), static_cast<long long>(b), static_cast<long long>(k),
                    aten, fused, aten / fused, greedy.c_str(), greedy_ratio.c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
