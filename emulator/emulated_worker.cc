#include "emulator/emulated_worker.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "runtime/batch_message.h"

namespace packrat::emulator {

EmulatedWorker::EmulatedWorker(shm::Segment* segment, const EmulatedModel* model,
                               EmulatedCpus* cpus, EmulatedWorkerOptions options)
    : segment_(segment),
      model_(model),
      cpus_(cpus),
      options_(std::move(options)),
      link_(segment, options_.agent_pid, options_.poll_interval),
      jitter_(options_.jitter_cv, options_.jitter_seed) {
  options_.poll_interval = link_.poll_interval();
}

Status EmulatedWorker::Run() {
  return link_.Serve(options_.idle_spin,
                     [this](const shm::BatchMessage& msg, shm::CompletionMessage* done) {
                       return Execute(msg, done);
                     });
}

bool EmulatedWorker::Execute(const shm::BatchMessage& msg, shm::CompletionMessage* done) {
  runtime::BeginCompletion(msg, done);
  std::vector<runtime::RawTensor> inputs;
  Status status = runtime::UnpackBatchMessage(
      msg, segment_->num_slots(), segment_->input_capacity(),
      [this](uint32_t slot) { return segment_->input_slab(slot); }, &inputs);
  int64_t rows = msg.rows;
  if (status.ok() && rows < 1 && !inputs.empty() && !inputs[0].shape.empty()) {
    rows = inputs[0].shape[0];
  }
  if (status.ok() && rows < 1) status = InvalidArgument("a batch of no rows");
  if (status.ok()) {
    const auto start = std::chrono::steady_clock::now();
    const auto latency = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double, std::nano>(model_->Latency(rows)) * jitter_.Next());
    StatusOr<bool> computed =
        cpus_->Compute(latency, options_.cpus, [this] { return link_.AgentAlive(); });
    if (!computed.ok()) {
      status = computed.status();
    } else if (!*computed) {
      return false;  // the agent went away
    }
    done->compute_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now() - start)
                                                 .count());
  }
  if (status.ok()) {
    status = model_->WriteOutputs(
        rows, segment_->output_slab(msg.slot), segment_->output_capacity(),
        [this, &msg](uint64_t bytes) { return segment_->BackOutput(msg.slot, bytes); }, done);
  }
  if (status.ok()) {
    done->rows = rows;
    done->status = shm::CompletionStatus::kOk;
  } else {
    runtime::FailCompletion(status, done);
  }
  return true;
}

}  // namespace packrat::emulator
