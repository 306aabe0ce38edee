#include "runtime/worker.h"

#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "runtime/batch_message.h"

namespace packrat::runtime {

Worker::Worker(shm::Segment* segment, ModelRunner* runner, WorkerOptions options)
    : segment_(segment), runner_(runner), options_(options) {}

bool Worker::AgentAlive() const {
  return options_.agent_pid == 0 || getppid() == options_.agent_pid;
}

Status Worker::Run() {
  shm::BatchMessage msg;
  shm::CompletionMessage done;
  while (true) {
    Status popped = segment_->requests().Pop(&msg, options_.poll_interval);
    if (popped.code() == StatusCode::kDeadlineExceeded) {
      if (!AgentAlive()) return Unavailable("agent exited");
      continue;
    }
    if (!popped.ok()) return Status::Ok();  // ring closed: orderly shutdown
    Execute(msg, &done);
    while (true) {
      Status pushed = segment_->completions().Push(done, options_.poll_interval);
      if (pushed.ok()) break;
      if (pushed.code() != StatusCode::kDeadlineExceeded) return Status::Ok();
      if (!AgentAlive()) return Unavailable("agent exited");
    }
  }
}

Status Worker::Unpack(const shm::BatchMessage& msg, std::vector<RawTensor>* inputs) const {
  return UnpackBatchMessage(
      msg, segment_->num_slots(), segment_->input_capacity(),
      [this](uint32_t slot) { return segment_->input_slab(slot); }, inputs);
}

void Worker::Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done) {
  done->batch_id = msg.batch_id;
  done->slot = msg.slot;
  done->num_tensors = 0;
  done->compute_ns = 0;
  done->error[0] = '\0';
  Status status = Unpack(msg, &inputs_);
  if (status.ok()) {
    uint8_t* out = segment_->output_slab(msg.slot);
    const auto start = std::chrono::steady_clock::now();
    status = runner_->Run(inputs_, out, segment_->output_capacity(), &outputs_);
    done->compute_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now() - start)
                                                 .count());
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
    if (status.ok()) done->num_tensors = static_cast<uint32_t>(outputs_.size());
  }
  if (status.ok()) {
    done->status = shm::CompletionStatus::kOk;
  } else {
    done->status = shm::CompletionStatus::kError;
    const std::string text = status.message();
    const size_t n = std::min(text.size(), shm::kErrorTextSize - 1);
    std::memcpy(done->error, text.data(), n);
    done->error[n] = '\0';
    PACKRAT_LOG(WARNING) << "batch " << msg.batch_id << " failed: " << text;
  }
}

}  // namespace packrat::runtime
