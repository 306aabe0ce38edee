#include "runtime/worker.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "runtime/batch_message.h"

namespace packrat::runtime {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NanosSince(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

}  // namespace

Worker::Worker(shm::Segment* segment, ModelRunner* runner, WorkerOptions options)
    : segment_(segment),
      runner_(runner),
      options_(options),
      link_(segment, options.agent_pid, options.poll_interval) {
  options_.poll_interval = link_.poll_interval();  // raised to 1 ms as the link does
}

Status Worker::Run() {
  return link_.Serve(options_.idle_spin,
                     [this](const shm::BatchMessage& msg, shm::CompletionMessage* done) {
                       return Execute(msg, done);
                     });
}

Status Worker::Unpack(const shm::BatchMessage& msg, std::vector<RawTensor>* inputs) const {
  return UnpackBatchMessage(
      msg, segment_->num_slots(), segment_->input_capacity(),
      [this](uint32_t slot) { return segment_->input_slab(slot); }, inputs);
}

bool Worker::Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done) {
  BeginCompletion(msg, done);
  Status status = Unpack(msg, &inputs_);
  if (status.ok()) {
    if (runner_->num_stages() > 0) {
      if (!ExecuteStaged(msg, done, &status)) return false;
    } else {
      const auto start = Clock::now();
      status = runner_->Run(inputs_, segment_->output_slab(msg.slot), segment_->output_capacity(),
                            &outputs_);
      done->compute_ns = NanosSince(start);
    }
  }
  uint8_t* out = segment_->output_slab(msg.slot);
  if (status.ok() && outputs_.size() > static_cast<size_t>(shm::kMaxTensors)) {
    status = InvalidArgument("model returned more than " + std::to_string(shm::kMaxTensors) +
                             " outputs");
  }
  for (size_t i = 0; status.ok() && i < outputs_.size(); ++i) {
    const RawTensor& t = outputs_[i];
    if (t.shape.size() > static_cast<size_t>(shm::kMaxDims)) {
      status = InvalidArgument("output rank exceeds " + std::to_string(shm::kMaxDims));
      break;
    }
    shm::TensorDesc& d = done->tensors[i];
    std::memset(&d, 0, sizeof(d));
    d.datatype = static_cast<uint8_t>(t.datatype);
    d.ndim = static_cast<uint8_t>(t.shape.size());
    for (size_t k = 0; k < t.shape.size(); ++k) d.shape[k] = t.shape[k];
    d.offset = static_cast<uint64_t>(static_cast<uint8_t*>(t.data) - out);
    d.byte_size = t.byte_size;
  }
  if (status.ok()) {
    done->num_tensors = static_cast<uint32_t>(outputs_.size());
    done->rows = outputs_.empty() || outputs_[0].shape.empty() ? msg.rows : outputs_[0].shape[0];
    done->status = shm::CompletionStatus::kOk;
  } else {
    FailCompletion(status, done);
  }
  return true;
}

bool Worker::ExecuteStaged(const shm::BatchMessage& msg, shm::CompletionMessage* done,
                           Status* status) {
  const int stages = runner_->num_stages();
  done->num_stages = static_cast<uint32_t>(std::min(stages, shm::kMaxStages));
  std::fill(std::begin(done->stage_ns), std::end(done->stage_ns), 0);
  const auto start = Clock::now();
  *status = runner_->Begin(inputs_);
  bool ask = (msg.flags & shm::kBatchAllowTopUp) != 0;
  for (int k = 0; status->ok() && k < stages; ++k) {
    const auto stage_start = Clock::now();
    *status = runner_->RunStage();
    if (k < shm::kMaxStages) done->stage_ns[k] += NanosSince(stage_start);
    // Ask only while rows wait in the agent's queue (the hint saves the round trip otherwise).
    if (status->ok() && ask && k + 1 < stages &&
        segment_->header()->queued_rows_hint.load(std::memory_order_acquire) > 0) {
      if (!TopUp(msg, start, &ask, status)) return false;
    }
  }
  if (status->ok()) {
    *status =
        runner_->Finish(segment_->output_slab(msg.slot), segment_->output_capacity(), &outputs_);
  }
  done->compute_ns = NanosSince(start);
  return true;
}

bool Worker::TopUp(const shm::BatchMessage& msg, Clock::time_point start, bool* keep_asking,
                   Status* status) {
  shm::CompletionMessage query;
  std::memset(&query, 0, sizeof(query));
  query.batch_id = msg.batch_id;
  query.slot = msg.slot;
  query.kind = shm::CompletionKind::kTopUpQuery;
  query.compute_ns = NanosSince(start);
  query.rows = runner_->running_rows();
  query.stages_done = static_cast<uint32_t>(runner_->stages_done());
  query.num_stages = static_cast<uint32_t>(runner_->num_stages());
  if (!link_.PushCompletion(query)) return false;
  // Exactly one answer comes for each query: rows granted are already the batch's, so the
  // worker must see the answer whatever it takes (the agent answers at once).
  shm::BatchMessage grant;
  while (true) {
    Status popped = segment_->topups().Pop(&grant, link_.poll_interval());
    if (popped.ok()) break;
    if (popped.code() != StatusCode::kDeadlineExceeded || !link_.AgentAlive()) return false;
  }
  if (grant.batch_id != msg.batch_id || grant.slot != msg.slot) {
    *status = Internal("top-up answer for another batch");
    return true;
  }
  *keep_asking = grant.rows == 0 && (grant.flags & shm::kGrantFinal) == 0;
  if (grant.rows == 0) return true;
  *status = Unpack(grant, &joined_);
  if (status->ok()) *status = runner_->Join(joined_);
  if (status->ok()) {
    PACKRAT_LOG(DEBUG) << "batch " << msg.batch_id << ": " << grant.rows << " row(s) joined after "
                       << runner_->stages_done() << " stage(s), " << runner_->running_rows()
                       << " rows now";
  }
  return true;
}

}  // namespace packrat::runtime
