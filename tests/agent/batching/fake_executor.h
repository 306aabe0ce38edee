// Test doubles for the batching tests: requests whose every row says which request and row it
// is, a recorder for their completion callbacks, and a fake InstanceExecutor whose "model" maps
// each input row to an output row, so the reassembled outputs can be checked exactly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/batching/inference_request.h"
#include "agent/batching/instance_executor.h"
#include "agent/batching/slice_io.h"
#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/tensor.h"

namespace packrat::batching_test {

// Input "x" is INT64 [rows, width]; row r of request `id` holds (id, r, id + r, id + r, ...).
inline DecodedRequest MakeDecoded(int64_t id, int64_t rows, int64_t width = 2) {
  DecodedRequest d;
  d.id = std::to_string(id);
  d.rows = rows;
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * width) * sizeof(int64_t));
  auto* v = reinterpret_cast<int64_t*>(bytes.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) v[r * width + c] = c == 0 ? id : c == 1 ? r : id + r;
  }
  d.owned.push_back(std::move(bytes));
  d.inputs.push_back(
      {"x", DataType::kInt64, {rows, width}, d.owned.back().data(), d.owned.back().size()});
  return d;
}

// The fake model: output "y" is INT64 [rows, 3]; input row (a, b, ...) gives (2a, b + 100,
// 1000a + b).
inline constexpr int64_t kOutputWidth = 3;
inline void ModelRow(const int64_t* in, int64_t* out) {
  out[0] = 2 * in[0];
  out[1] = in[1] + 100;
  out[2] = 1000 * in[0] + in[1];
}

// What a request's callback saw. Thread-safe.
class Completion {
 public:
  InferenceRequest::Callback Callback() {
    return [this](const Status& status, InferenceRequest& request) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_;
      status_ = status;
      if (status.ok()) outputs_ = request.outputs();
      cv_.notify_all();
    };
  }

  // Blocks until the callback ran (or `timeout`); returns whether it did.
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return calls_ > 0; });
  }

  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // Checks that the callback ran once with OK and outputs exactly ModelRow of every row.
  ::testing::AssertionResult HasCorrectOutputs(int64_t id, int64_t rows) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (calls_ != 1) return ::testing::AssertionFailure() << "callback ran " << calls_ << " times";
    if (!status_.ok()) return ::testing::AssertionFailure() << status_.ToString();
    if (outputs_.size() != 1) {
      return ::testing::AssertionFailure() << outputs_.size() << " outputs";
    }
    const Tensor& y = outputs_[0];
    if (y.name != "y" || y.datatype != DataType::kInt64 ||
        y.shape != std::vector<int64_t>{rows, kOutputWidth} ||
        y.bytes.size() != static_cast<size_t>(rows * kOutputWidth) * sizeof(int64_t)) {
      return ::testing::AssertionFailure() << "output " << y.name << " " << ShapeToString(y.shape);
    }
    const auto* got = reinterpret_cast<const int64_t*>(y.bytes.data());
    for (int64_t r = 0; r < rows; ++r) {
      int64_t want[kOutputWidth];
      const int64_t in[2] = {id, r};
      ModelRow(in, want);
      for (int64_t c = 0; c < kOutputWidth; ++c) {
        if (got[r * kOutputWidth + c] != want[c]) {
          return ::testing::AssertionFailure()
                 << "request " << id << " row " << r << " col " << c << ": got "
                 << got[r * kOutputWidth + c] << ", want " << want[c];
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  Status status_;
  std::vector<Tensor> outputs_;
};

inline std::shared_ptr<InferenceRequest> MakeRequest(int64_t id, int64_t rows,
                                                     Completion* completion,
                                                     SteadyTime arrival = SteadyTime{},
                                                     int64_t width = 2) {
  return std::make_shared<InferenceRequest>(MakeDecoded(id, rows, width), completion->Callback(),
                                            arrival);
}

// A fake instance. kInline runs a slice inside Enqueue; kDeferred holds slices until the test
// runs them (RunAll / RunBatch); kWorker runs them on the executor's own thread. A failing
// executor fails every row it gets. Records what it saw; thread-safe.
class FakeExecutor : public InstanceExecutor {
 public:
  enum class Mode { kInline, kDeferred, kWorker };

  FakeExecutor(int64_t batch_size, Mode mode, bool failing = false)
      : batch_size_(batch_size), mode_(mode), failing_(failing) {
    if (mode_ == Mode::kWorker) worker_ = std::thread([this] { WorkerLoop(); });
  }
  ~FakeExecutor() override { StopWorker(); }

  void Enqueue(WorkSlice slice) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++slices_;
      max_slice_rows_ = std::max(max_slice_rows_, slice.rows);
      if (slice.rows > batch_size_) ++oversized_slices_;
      int64_t rows = 0;
      for (const RowRange& range : slice.ranges) {
        rows += range.rows;
        std::vector<int>& hits = row_hits_[range.request->decoded().id];
        hits.resize(range.request->rows());
        for (int64_t r = range.begin; r < range.begin + range.rows; ++r) ++hits[r];
        carried_.insert(range.request->decoded().id);
      }
      if (rows != slice.rows || slice.ranges.empty()) ++malformed_slices_;
      rows_ += slice.rows;
      if (mode_ != Mode::kInline) {
        pending_.push_back(std::move(slice));
        cv_.notify_all();
        return;
      }
    }
    Run(std::move(slice));
  }

  int64_t batch_size() const override { return batch_size_; }
  uint64_t input_capacity() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return input_capacity_;
  }
  // Its input slab's bytes, as a runtime's (0: 64 KiB, unreported); a slice that does not fit
  // is a test failure.
  void set_input_capacity(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    input_capacity_ = bytes;
  }
  bool alive() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return alive_;
  }
  // Marks the executor dead (its runtime gone) or alive again; it still runs what it is given.
  void set_alive(bool alive) {
    std::lock_guard<std::mutex> lock(mu_);
    alive_ = alive;
  }
  size_t load() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size() + extra_load_;
  }

  // kDeferred: runs every held slice (of batch `batch_id` only, if given); returns how many.
  size_t RunAll() {
    return RunMatching([](const WorkSlice&) { return true; });
  }
  size_t RunBatch(uint64_t batch_id) {
    return RunMatching([&](const WorkSlice& s) { return s.batch_id == batch_id; });
  }
  // kDeferred: runs the oldest held slice of batch `batch_id`; false if there is none.
  bool RunOne(uint64_t batch_id) {
    bool first = true;
    return RunMatching([&](const WorkSlice& s) {
             if (!first || s.batch_id != batch_id) return false;
             first = false;
             return true;
           }) == 1;
  }
  // kDeferred: held slices of batch `batch_id`.
  size_t pending_of(uint64_t batch_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(pending_.begin(), pending_.end(),
                         [&](const WorkSlice& s) { return s.batch_id == batch_id; });
  }
  // kDeferred: blocks until at least `n` slices are held, or `timeout`.
  bool WaitForPending(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pending_.size() >= n; });
  }
  // kWorker: finishes every queued slice, then joins the thread.
  void StopWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  void set_extra_load(size_t load) {
    std::lock_guard<std::mutex> lock(mu_);
    extra_load_ = load;
  }
  size_t pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }
  size_t slices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return slices_;
  }
  int64_t rows() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }
  int64_t max_slice_rows() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_slice_rows_;
  }
  size_t oversized_slices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return oversized_slices_;
  }
  size_t malformed_slices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return malformed_slices_;
  }
  // Ids of the requests this executor got rows of.
  std::set<std::string> carried() const {
    std::lock_guard<std::mutex> lock(mu_);
    return carried_;
  }
  // Per request id, how many times each row was handed to this executor.
  std::map<std::string, std::vector<int>> row_hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return row_hits_;
  }

 private:
  template <typename Pred>
  size_t RunMatching(Pred pred) {
    std::vector<WorkSlice> run;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (pred(*it)) {
          run.push_back(std::move(*it));
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (WorkSlice& s : run) Run(std::move(s));
    return run.size();
  }

  void WorkerLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stop_ and nothing left
      WorkSlice slice = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      Run(std::move(slice));
      lock.lock();
    }
  }

  // The "forward pass": gather the slice's input rows into a slab, compute, scatter outputs.
  void Run(WorkSlice slice) {
    if (failing_) {
      FailSlice(slice, Internal("instance crashed"));
    } else {
      std::vector<uint8_t> slab(input_capacity() > 0 ? input_capacity() : 1 << 16);
      std::vector<TensorView> inputs;
      const Status gathered = GatherInputs(slice, slab.data(), slab.size(), &inputs);
      if (!gathered.ok()) {
        ADD_FAILURE() << gathered.ToString();
        FailSlice(slice, gathered);
      } else {
        const TensorView& x = inputs[0];
        const int64_t width = x.shape[1];
        std::vector<int64_t> out(static_cast<size_t>(slice.rows * kOutputWidth));
        const auto* in = reinterpret_cast<const int64_t*>(x.data);
        for (int64_t r = 0; r < slice.rows; ++r) {
          ModelRow(in + r * width, out.data() + r * kOutputWidth);
        }
        TensorView y{"y",
                     DataType::kInt64,
                     {slice.rows, kOutputWidth},
                     reinterpret_cast<const uint8_t*>(out.data()),
                     out.size() * sizeof(int64_t)};
        ScatterOutputs(slice, {y});
      }
    }
    if (slice.on_done) slice.on_done();
  }

  const int64_t batch_size_;
  const Mode mode_;
  const bool failing_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkSlice> pending_;
  bool stop_ = false;
  size_t extra_load_ = 0;
  uint64_t input_capacity_ = 0;
  bool alive_ = true;
  size_t slices_ = 0;
  int64_t rows_ = 0;
  int64_t max_slice_rows_ = 0;
  size_t oversized_slices_ = 0;
  size_t malformed_slices_ = 0;
  std::set<std::string> carried_;
  std::map<std::string, std::vector<int>> row_hits_;
  std::thread worker_;
};

}  // namespace packrat::batching_test
