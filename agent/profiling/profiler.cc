#include "agent/profiling/profiler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "agent/batching/inference_request.h"
#include "agent/pool/decode_instance.h"
#include "agent/pool/runtime_instance.h"
#include "agent/pool/runtime_options.h"
#include "common/logging.h"
#include "common/mutex.h"

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

// Times points ⟨t, b⟩ for one thread count t on one pinned runtime it owns.
class PointMeter {
 public:
  virtual ~PointMeter() = default;
  // The timed iterations of batch size b, in ms.
  virtual StatusOr<std::vector<double>> Measure(int b) = 0;
  // The point's latency from its iterations (not empty): their mean.
  virtual double Typical(const std::vector<double>& ms) const {
    double mean = 0;
    for (double v : ms) mean += v / static_cast<double>(ms.size());
    return mean;
  }
};

namespace {

// Keeps each of `instances` busy with batches of `decoded`, back to back, one thread per
// instance, from construction until Stop(). Neither is owned; both must outlive this object.
class NeighbourLoad {
 public:
  NeighbourLoad(const std::vector<std::unique_ptr<RuntimeInstance>>& instances,
                const DecodedRequest& decoded) {
    for (const auto& instance : instances) {
      threads_.emplace_back([this, runtime = instance.get(), &decoded] {
        bool first = true;
        while (!stopping_.load(std::memory_order_relaxed)) {
          StatusOr<double> took = TimeOneBatch(runtime, decoded);
          MutexLock lock(&mu_);
          if (!took.ok()) {
            if (failed_.ok()) failed_ = took.status();
            warmed_.NotifyAll();
            return;
          }
          if (first) {
            first = false;
            ++warm_;
            warmed_.NotifyAll();
          }
        }
      });
    }
  }
  ~NeighbourLoad() { Join(); }

  // Blocks until every neighbour has finished its first batch of this size: a runtime's first
  // batch of a new shape builds its kernels (oneDNN primitives, JIT code) on the CPU without
  // streaming the weights, so timing beside it would see neighbours lighter than serving ones.
  // Returns the first error a neighbour met.
  Status WaitUntilWarm() {
    MutexLock lock(&mu_);
    while (warm_ < threads_.size() && failed_.ok()) warmed_.Wait(&mu_);
    return failed_;
  }

  // Blocks until every neighbour finished its batch in flight. Returns the first error a
  // neighbour met (it stopped there), or OK.
  Status Stop() {
    Join();
    MutexLock lock(&mu_);
    return failed_;
  }

 private:
  void Join() {
    stopping_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar warmed_;
  size_t warm_ GUARDED_BY(mu_) = 0;  // neighbours past their first batch
  Status failed_ GUARDED_BY(mu_);
};

// Batches of b synthetic rows through a batch runtime, timed whole, until the mean is known to
// the target error (or the iteration / time bounds); `neighbours` (may be empty) run batches
// of b meanwhile.
class BatchMeter : public PointMeter {
 public:
  BatchMeter(const ProfilerOptions& options, std::unique_ptr<RuntimeInstance> instance,
             std::vector<std::unique_ptr<RuntimeInstance>> neighbours)
      : options_(options), instance_(std::move(instance)), neighbours_(std::move(neighbours)) {}
  ~BatchMeter() override {
    for (auto& n : neighbours_) n->Stop(std::chrono::seconds(10));
    instance_->Stop(std::chrono::seconds(10));
  }

  StatusOr<std::vector<double>> Measure(int b) override {
    ASSIGN_OR_RETURN(DecodedRequest decoded, SyntheticRequest(options_.model.inputs, b));
    NeighbourLoad load(neighbours_, decoded);
    ASSIGN_OR_RETURN(std::vector<double> ms, TimeBatches(decoded, &load));
    RETURN_IF_ERROR(load.Stop());
    return ms;
  }

 private:
  // Warms the measured instance up, waits for `load`'s neighbours to warm up too, then times.
  StatusOr<std::vector<double>> TimeBatches(const DecodedRequest& decoded, NeighbourLoad* load) {
    for (int i = 0; i < options_.warmup_iterations; ++i) {
      RETURN_IF_ERROR(TimeOneBatch(instance_.get(), decoded).status());
    }
    RETURN_IF_ERROR(load->WaitUntilWarm());
    const auto start = Clock::now();
    std::vector<double> ms;
    while (true) {
      ASSIGN_OR_RETURN(double one, TimeOneBatch(instance_.get(), decoded));
      ms.push_back(one);
      const double spent = std::chrono::duration<double>(Clock::now() - start).count();
      if (static_cast<int>(ms.size()) >= options_.min_iterations &&
          (RelativeError(ms) <= options_.target_rel_error ||
           static_cast<int>(ms.size()) >= options_.max_iterations ||
           spent >= options_.max_seconds_per_point.count())) {
        return ms;
      }
    }
  }

  const ProfilerOptions& options_;
  std::unique_ptr<RuntimeInstance> instance_;
  std::vector<std::unique_ptr<RuntimeInstance>> neighbours_;
};

// Decode steps with b sequences: b greedy sequences decoded together by a decode runtime; the
// steps with all b active count, after the first (the graph executor specialises for a new
// size). A point is the median of its steps: a dozen steps, where one slowed by the machine
// (GPT-2-like: 149 ms among steps of 93–110) moved the mean enough to change a plan.
class DecodeMeter : public PointMeter {
 public:
  struct Steps {
    Mutex mu;
    std::vector<std::pair<int64_t, double>> seen GUARDED_BY(mu);  // sequences in the step, ms
  };

  // `neighbours` (may be empty) decode b sequences of their own during each round.
  DecodeMeter(const ProfilerOptions& options, std::shared_ptr<Steps> steps,
              std::unique_ptr<DecodeInstance> decoder,
              std::vector<std::unique_ptr<DecodeInstance>> neighbours)
      : options_(options),
        steps_(std::move(steps)),
        decoder_(std::move(decoder)),
        neighbours_(std::move(neighbours)) {}
  ~DecodeMeter() override {
    decoder_->Stop(std::chrono::seconds(10));
    for (auto& n : neighbours_) n->Stop(std::chrono::seconds(10));
  }

  // The b sequences are submitted one by one and join the running decode at step boundaries:
  // on a busy machine the first ones can finish before the last one joins, leaving no step
  // with all b. Such a round measured nothing and is run again.
  StatusOr<std::vector<double>> Measure(int b) override {
    constexpr int kRounds = 4;
    for (int round = 1;; ++round) {
      ASSIGN_OR_RETURN(std::vector<double> ms, MeasureRound(b));
      if (!ms.empty()) return ms;
      if (round == kRounds) {
        return Internal("no decode step ran with " + std::to_string(b) + " sequences in " +
                        std::to_string(kRounds) + " rounds");
      }
      PACKRAT_LOG(WARNING) << "profiling decode steps of " << b
                           << " sequences: none ran with all of them; measuring again";
    }
  }

 private:
  // One round: the timed steps that ran with all b sequences (empty if none did).
  StatusOr<std::vector<double>> MeasureRound(int b) {
    {
      MutexLock lock(&steps_->mu);
      steps_->seen.clear();
    }
    const int timed = std::max(options_.min_iterations, 12);
    std::mutex mu;
    std::condition_variable cv;
    int ended = 0;
    Status failed;
    auto submit = [&](DecodeInstance* decoder, int tokens) {
      for (int k = 0; k < b; ++k) {
        auto request = std::make_shared<GenerateRequest>();
        request->prompt = {1, 2, 3, 4, 5, 6, 7, 8};
        request->params.max_tokens = static_cast<uint32_t>(tokens);
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
    };
    // The neighbours' sequences first and longer, so that they decode through every timed step.
    for (auto& n : neighbours_) submit(n.get(), 2 * timed + 6);
    submit(decoder_.get(), timed + 3);
    {
      std::unique_lock<std::mutex> lock(mu);
      const int all = b * static_cast<int>(1 + neighbours_.size());
      cv.wait(lock, [&] { return ended == all; });
      RETURN_IF_ERROR(failed);
    }
    std::vector<double> ms;
    MutexLock lock(&steps_->mu);
    bool first = true;
    for (const auto& [n, took] : steps_->seen) {
      if (n != b) continue;
      if (!first) ms.push_back(took);
      first = false;
    }
    return ms;
  }

  double Typical(const std::vector<double>& ms) const override {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  const ProfilerOptions& options_;
  std::shared_ptr<Steps> steps_;
  std::unique_ptr<DecodeInstance> decoder_;
  std::vector<std::unique_ptr<DecodeInstance>> neighbours_;
};

// Where profiling instance `slice` of `threads` threads runs and what it is called (a
// RuntimeInstanceOptions or a DecodeInstanceOptions from runtime_options.h): slice 0 is the
// measured one, slice j the neighbour on the j-th next `threads` cores.
template <typename InstanceOptions>
void SetSlice(const ProfilerOptions& options, int threads, int slice, InstanceOptions* o) {
  o->model_name = options.model.name + (slice == 0 ? "-profile" : "-neighbour");
  o->index = slice == 0 ? threads : threads * 1000 + slice;
  o->threads = threads;
  o->cores.assign(options.cores.begin() + slice * threads,
                  options.cores.begin() + (slice + 1) * threads);
  o->slice_timeout = std::chrono::milliseconds(0);  // a profiled batch may run for minutes
}

// Runs start(slice) for slices 0..slices-1 in parallel: all the instances in slice order, or
// the first error once those that started are stopped again. Blocks until every start ends.
template <typename Instance, typename Start>
StatusOr<std::vector<std::unique_ptr<Instance>>> StartSlices(int slices, const Start& start) {
  std::vector<std::future<StatusOr<std::unique_ptr<Instance>>>> starts;
  for (int slice = 0; slice < slices; ++slice) {
    starts.push_back(std::async(std::launch::async, start, slice));
  }
  std::vector<std::unique_ptr<Instance>> started;
  Status failed;
  for (auto& f : starts) {
    StatusOr<std::unique_ptr<Instance>> one = f.get();
    if (one.ok()) {
      started.push_back(std::move(*one));
    } else if (failed.ok()) {
      failed = one.status();
    }
  }
  if (!failed.ok()) {
    for (auto& instance : started) instance->Stop(std::chrono::seconds(10));
    return failed;
  }
  return started;
}

}  // namespace

double RelativeError(const std::vector<double>& ms) {
  if (ms.size() < 2) return 1;
  const double n = static_cast<double>(ms.size());
  double mean = 0;
  for (double v : ms) mean += v / n;
  double var = 0;
  for (double v : ms) var += (v - mean) * (v - mean);
  return 1.96 * std::sqrt(var / (n - 1) / n) / mean;
}

Profiler::Profiler(ProfilerOptions options, ProcessLauncher* launcher)
    : options_(std::move(options)), launcher_(launcher) {}

StatusOr<std::unique_ptr<PointMeter>> Profiler::StartMeter(int threads, int max_batch) {
  const int slices =
      options_.neighbours ? std::max(1, static_cast<int>(options_.cores.size()) / threads) : 1;
  if (options_.model.generation.enabled) {
    // The measured decoder on the first `threads` cores; neighbour j on the j-th next slice.
    auto steps = std::make_shared<DecodeMeter::Steps>();
    auto start = [&](int slice) {
      DecodeInstanceOptions o = DecodeRuntimeOptions(options_.model, options_.runtime_path);
      SetSlice(options_, threads, slice, &o);
      o.slots = max_batch;
      o.refill = "step";
      o.max_prompt_tokens = 64;
      if (slice == 0) {
        o.on_step = [steps](int64_t n, std::chrono::nanoseconds took) {
          MutexLock lock(&steps->mu);
          steps->seen.emplace_back(n, std::chrono::duration<double, std::milli>(took).count());
        };
      }
      return DecodeInstance::Start(o, launcher_);
    };
    ASSIGN_OR_RETURN(std::vector<std::unique_ptr<DecodeInstance>> started,
                     StartSlices<DecodeInstance>(slices, start));
    if (slices > 1) {
      PACKRAT_LOG(INFO) << "profiling '" << options_.model.name << "' at t=" << threads
                        << " next to " << slices - 1 << " decoding neighbour(s) of " << threads
                        << " thread(s)";
    }
    std::unique_ptr<DecodeInstance> measured = std::move(started.front());
    started.erase(started.begin());
    return std::unique_ptr<PointMeter>(
        new DecodeMeter(options_, steps, std::move(measured), std::move(started)));
  }
  // The measured runtime on the first `threads` cores; neighbour j on the j-th next slice.
  auto start = [&](int slice) {
    RuntimeInstanceOptions o = BatchRuntimeOptions(options_.model, options_.runtime_path);
    ForMeasurement(&o);
    SetSlice(options_, threads, slice, &o);
    o.batch = max_batch;
    return RuntimeInstance::Start(o, launcher_);
  };
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<RuntimeInstance>> started,
                   StartSlices<RuntimeInstance>(slices, start));
  if (slices > 1) {
    PACKRAT_LOG(INFO) << "profiling '" << options_.model.name << "' at t=" << threads << " next to "
                      << slices - 1 << " busy neighbour(s) of " << threads << " thread(s)";
  }
  std::unique_ptr<RuntimeInstance> measured = std::move(started.front());
  started.erase(started.begin());
  return std::unique_ptr<PointMeter>(
      new BatchMeter(options_, std::move(measured), std::move(started)));
}

std::string ProfileLoad(const ProfilerOptions& options) {
  // A decoder's steps run padded to faster counts (runtime/decoder.h) and its points are
  // medians: profiles timed before either are not reused.
  if (options.model.generation.enabled) {
    return options.neighbours ? "decode-steps-neighbours" : "decode-steps";
  }
  return options.neighbours ? "neighbours" : "alone";
}

Status Profiler::Run(Profile* profile, const std::function<Status(const Profile&)>& checkpoint,
                     const std::function<void(const ProfileProgress&)>& progress) {
  if (options_.threads.empty() || options_.batches.empty()) {
    return InvalidArgument("nothing to profile: no thread counts or no batch sizes");
  }
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
    ASSIGN_OR_RETURN(std::unique_ptr<PointMeter> meter, StartMeter(t, max_batch));
    for (int b : todo) {
      const auto point_start = Clock::now();
      ASSIGN_OR_RETURN(std::vector<double> ms, meter->Measure(b));
      const double typical = meter->Typical(ms);
      ProfilePoint point;
      point.threads = t;
      point.batch = b;
      point.latency_ms = typical;
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
      p.latency_ms = typical;
      p.rel_error = RelativeError(ms);
      p.iterations = static_cast<int>(ms.size());
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - run_start).count();
      p.eta_s = measured_s / measured * (p.total - p.done);
      if (progress) progress(p);
    }
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
