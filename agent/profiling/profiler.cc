#include "agent/profiling/profiler.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <random>

#include "agent/batching/inference_request.h"
#include "agent/pool/decode_instance.h"
#include "agent/pool/runtime_instance.h"
#include "common/logging.h"

namespace packrat {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

StatusOr<DecodedRequest> SyntheticRequest(const std::vector<TensorSpec>& inputs, int rows) {
  DecodedRequest request;
  request.rows = rows;
  auto storage = std::make_shared<std::string>();
  std::vector<std::pair<size_t, size_t>> spans;  // offset, size per input
  for (const TensorSpec& spec : inputs) {
    std::vector<int64_t> shape = spec.shape;
    shape[0] = rows;
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    const int64_t count = ElementCount(shape);
    if (count < 0) return InvalidArgument("input '" + spec.name + "' is too large to profile");
    const size_t bytes = static_cast<size_t>(count) * DataTypeSize(spec.datatype);
    spans.emplace_back(storage->size(), bytes);
    storage->resize(storage->size() + bytes, '\0');
    TensorView view;
    view.name = spec.name;
    view.datatype = spec.datatype;
    view.shape = shape;
    view.byte_size = bytes;
    request.inputs.push_back(view);
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i < inputs.size(); ++i) {
    char* base = storage->data() + spans[i].first;
    if (inputs[i].datatype == DataType::kFp32) {
      for (size_t k = 0; k < spans[i].second / 4; ++k) {
        const float f = normal(rng);
        std::memcpy(base + 4 * k, &f, 4);
      }
    }
    request.inputs[i].data = reinterpret_cast<const uint8_t*>(base);
  }
  request.body = std::move(storage);
  return request;
}

StatusOr<double> TimeOneBatch(RuntimeInstance* instance, const DecodedRequest& decoded) {
  std::promise<Status> done;
  auto finished = done.get_future();
  auto request = std::make_shared<InferenceRequest>(
      decoded, [&done](const Status& s, InferenceRequest&) { done.set_value(s); }, Clock::now());
  WorkSlice slice;
  slice.rows = decoded.rows;
  slice.ranges.push_back({request, 0, decoded.rows});
  const auto start = Clock::now();
  instance->Enqueue(std::move(slice));
  RETURN_IF_ERROR(finished.get());
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Profiler::Profiler(ProfilerOptions options, ProcessLauncher* launcher)
    : options_(std::move(options)), launcher_(launcher) {}

Status Profiler::Run(Profile* profile, const std::function<Status(const Profile&)>& checkpoint,
                     const std::function<void(const ProfileProgress&)>& progress) {
  if (options_.threads.empty() || options_.batches.empty()) {
    return InvalidArgument("nothing to profile: no thread counts or no batch sizes");
  }
  if (options_.model.generation.enabled) return RunDecoding(profile, checkpoint, progress);
  const int max_threads = *std::max_element(options_.threads.begin(), options_.threads.end());
  if (max_threads > static_cast<int>(options_.cores.size())) {
    return InvalidArgument("cannot profile " + std::to_string(max_threads) + " threads on " +
                           std::to_string(options_.cores.size()) + " usable cores");
  }
  const int max_batch = *std::max_element(options_.batches.begin(), options_.batches.end());
  ProfileProgress p;
  p.total = static_cast<int>(options_.threads.size() * options_.batches.size());
  const auto run_start = Clock::now();
  double measured_s = 0;
  int measured = 0;
  for (int t : options_.threads) {
    std::vector<int> todo;
    for (int b : options_.batches) {
      if (profile->Find(t, b) == nullptr) {
        todo.push_back(b);
      } else {
        ++p.done;
      }
    }
    if (todo.empty()) continue;

    RuntimeInstanceOptions o;
    o.model_name = options_.model.name + "-profile";
    o.index = t;
    o.runtime_path = options_.runtime_path;
    o.model_path = options_.model.path;
    o.threads = t;
    o.batch = max_batch;
    o.cores.assign(options_.cores.begin(), options_.cores.begin() + t);
    o.inputs = options_.model.inputs;
    o.outputs = options_.model.outputs;
    o.warmup_iterations = 1;
    o.kernel = options_.model.kernel;
    o.accuracy = options_.model.accuracy;
    o.accuracy.samples = 0;  // the guard runs when serving; profiling measures speed only
    o.startup_timeout = std::chrono::seconds(options_.model.startup_timeout_s);
    o.slots = 1;
    ASSIGN_OR_RETURN(std::unique_ptr<RuntimeInstance> instance,
                     RuntimeInstance::Start(o, launcher_));

    for (int b : todo) {
      ASSIGN_OR_RETURN(DecodedRequest decoded, SyntheticRequest(options_.model.inputs, b));
      const auto point_start = Clock::now();
      for (int i = 0; i < options_.warmup_iterations; ++i) {
        RETURN_IF_ERROR(TimeOneBatch(instance.get(), decoded).status());
      }
      std::vector<double> ms;
      double mean = 0, rel = 1;
      while (true) {
        ASSIGN_OR_RETURN(double one, TimeOneBatch(instance.get(), decoded));
        ms.push_back(one);
        const double n = static_cast<double>(ms.size());
        mean = 0;
        for (double v : ms) mean += v;
        mean /= n;
        double var = 0;
        for (double v : ms) var += (v - mean) * (v - mean);
        var = ms.size() > 1 ? var / (n - 1) : 0;
        rel = ms.size() > 1 ? 1.96 * std::sqrt(var / n) / mean : 1;
        const double spent = std::chrono::duration<double>(Clock::now() - point_start).count();
        if (static_cast<int>(ms.size()) >= options_.min_iterations &&
            (rel <= options_.target_rel_error ||
             static_cast<int>(ms.size()) >= options_.max_iterations ||
             spent >= options_.max_seconds_per_point.count())) {
          break;
        }
      }
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = mean;
      point.latency_min_ms = *std::min_element(ms.begin(), ms.end());
      point.latency_max_ms = *std::max_element(ms.begin(), ms.end());
      point.iterations = static_cast<int>(ms.size());
      RETURN_IF_ERROR(profile->Add(point));
      if (checkpoint) RETURN_IF_ERROR(checkpoint(*profile));

      ++measured;
      ++p.done;
      measured_s += std::chrono::duration<double>(Clock::now() - point_start).count();
      p.threads = t;
      p.batch = b;
      p.latency_ms = mean;
      p.rel_error = rel;
      p.iterations = static_cast<int>(ms.size());
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
      p.eta_s = measured_s / measured * (p.total - p.done);
      if (progress) progress(p);
    }
    instance->Stop(std::chrono::seconds(10));
  }
  return Status::Ok();
}

Status Profiler::RunDecoding(Profile* profile,
                             const std::function<Status(const Profile&)>& checkpoint,
                             const std::function<void(const ProfileProgress&)>& progress) {
  const int max_threads = *std::max_element(options_.threads.begin(), options_.threads.end());
  if (max_threads > static_cast<int>(options_.cores.size())) {
    return InvalidArgument("cannot profile " + std::to_string(max_threads) + " threads on " +
                           std::to_string(options_.cores.size()) + " usable cores");
  }
  const int max_batch = *std::max_element(options_.batches.begin(), options_.batches.end());
  // Steps timed per point: the steps with all b sequences active, after the first (warm-up).
  const int steps = std::max(options_.min_iterations, 12);
  ProfileProgress p;
  p.total = static_cast<int>(options_.threads.size() * options_.batches.size());
  const auto run_start = Clock::now();
  for (int t : options_.threads) {
    std::vector<int> todo;
    for (int b : options_.batches) {
      if (profile->Find(t, b) == nullptr) {
        todo.push_back(b);
      } else {
        ++p.done;
      }
    }
    if (todo.empty()) continue;
    struct Steps {
      std::mutex mu;
      std::vector<std::pair<int64_t, double>> seen;  // sequences, ms
    };
    auto timings = std::make_shared<Steps>();
    DecodeInstanceOptions o;
    o.model_name = options_.model.name + "-profile";
    o.index = t;
    o.runtime_path = options_.runtime_path;
    o.model_path = options_.model.path;
    o.threads = t;
    o.slots = max_batch;
    o.refill = "step";
    o.max_prompt_tokens = 64;
    o.cores.assign(options_.cores.begin(), options_.cores.begin() + t);
    o.startup_timeout = std::chrono::seconds(options_.model.startup_timeout_s);
    o.on_step = [timings](int64_t n, std::chrono::nanoseconds took) {
      std::lock_guard<std::mutex> lock(timings->mu);
      timings->seen.emplace_back(n, std::chrono::duration<double, std::milli>(took).count());
    };
    ASSIGN_OR_RETURN(std::unique_ptr<DecodeInstance> decoder, DecodeInstance::Start(o, launcher_));
    for (int b : todo) {
      const auto point_start = Clock::now();
      {
        std::lock_guard<std::mutex> lock(timings->mu);
        timings->seen.clear();
      }
      std::mutex mu;
      std::condition_variable cv;
      int ended = 0;
      Status failed;
      for (int k = 0; k < b; ++k) {
        auto request = std::make_shared<GenerateRequest>();
        request->prompt = {1, 2, 3, 4, 5, 6, 7, 8};
        request->params.max_tokens = static_cast<uint32_t>(steps + 3);
        request->params.top_k = 1;
        request->params.temperature = 1;
        request->on_done = [&](const Status& s) {
          std::lock_guard<std::mutex> lock(mu);
          if (!s.ok() && failed.ok()) failed = s;
          ++ended;
          cv.notify_all();
        };
        decoder->Submit(std::move(request));
      }
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return ended == b; });
        RETURN_IF_ERROR(failed);
      }
      std::vector<double> ms;
      {
        std::lock_guard<std::mutex> lock(timings->mu);
        bool first = true;
        for (const auto& [n, took] : timings->seen) {
          if (n != b) continue;
          if (first) {  // the first full step of a new size specialises the graph
            first = false;
            continue;
          }
          ms.push_back(took);
        }
      }
      if (ms.empty()) {
        return Internal("no decode step ran with " + std::to_string(b) + " sequences");
      }
      double mean = 0;
      for (double v : ms) mean += v / static_cast<double>(ms.size());
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = mean;
      point.latency_min_ms = *std::min_element(ms.begin(), ms.end());
      point.latency_max_ms = *std::max_element(ms.begin(), ms.end());
      point.iterations = static_cast<int>(ms.size());
      RETURN_IF_ERROR(profile->Add(point));
      if (checkpoint) RETURN_IF_ERROR(checkpoint(*profile));
      ++p.done;
      p.threads = t;
      p.batch = b;
      p.latency_ms = mean;
      p.iterations = static_cast<int>(ms.size());
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
      const double point_s = std::chrono::duration<double>(Clock::now() - point_start).count();
      p.eta_s = point_s * (p.total - p.done);
      if (progress) progress(p);
    }
    decoder->Stop(std::chrono::seconds(10));
  }
  return Status::Ok();
}

StatusOr<std::vector<int>> ParseIntRanges(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    char* end = nullptr;
    const long lo = std::strtol(item.c_str(), &end, 10);
    long hi = lo;
    bool ok = !item.empty() && end != item.c_str();
    if (ok && dash != std::string::npos) {
      const std::string rest = item.substr(dash + 1);
      char* end2 = nullptr;
      hi = std::strtol(rest.c_str(), &end2, 10);
      ok = !rest.empty() && *end2 == '\0' && end == item.c_str() + dash;
    } else if (ok) {
      ok = *end == '\0';
    }
    if (!ok || lo < 1 || hi < lo || hi > 1 << 20) {
      return InvalidArgument("bad list '" + text + "': expected e.g. 1-4 or 1,2,4,8");
    }
    for (long v = lo; v <= hi; ++v) out.push_back(static_cast<int>(v));
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> PowersOfTwoUpTo(int max) {
  std::vector<int> out;
  for (int b = 1; b <= max; b *= 2) out.push_back(b);
  if (out.empty() || out.back() != max) out.push_back(max);
  return out;
}

}  // namespace packrat
