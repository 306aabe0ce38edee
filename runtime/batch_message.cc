#include "runtime/batch_message.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/logging.h"

namespace packrat::runtime {

Status UnpackBatchMessage(const shm::BatchMessage& msg, uint32_t num_slots, uint64_t capacity,
                          const std::function<uint8_t*(uint32_t)>& slab,
                          std::vector<RawTensor>* inputs) {
  if (msg.slot >= num_slots) return InvalidArgument("slot out of range");
  if (msg.num_tensors > static_cast<uint32_t>(shm::kMaxTensors)) {
    return InvalidArgument("too many tensors");
  }
  uint8_t* base = slab(msg.slot);
  inputs->resize(msg.num_tensors);
  for (uint32_t i = 0; i < msg.num_tensors; ++i) {
    const shm::TensorDesc& d = msg.tensors[i];
    if (d.ndim == 0 || d.ndim > shm::kMaxDims) return InvalidArgument("bad tensor rank");
    const size_t elem = DataTypeSize(static_cast<DataType>(d.datatype));
    if (elem == 0) return InvalidArgument("bad tensor datatype");
    uint64_t count = 1;
    for (int k = 0; k < d.ndim; ++k) {
      if (d.shape[k] < 0 ||
          (d.shape[k] > 0 && count > capacity / static_cast<uint64_t>(d.shape[k]))) {
        return InvalidArgument("bad tensor shape");
      }
      count *= static_cast<uint64_t>(d.shape[k]);
    }
    if (count * elem != d.byte_size || d.offset > capacity || d.byte_size > capacity - d.offset) {
      return InvalidArgument("tensor does not fit the input slab");
    }
    RawTensor& t = (*inputs)[i];
    t.datatype = static_cast<DataType>(d.datatype);
    t.shape.assign(d.shape, d.shape + d.ndim);
    t.data = base + d.offset;
    t.byte_size = d.byte_size;
  }
  return Status::Ok();
}

void BeginCompletion(const shm::BatchMessage& msg, shm::CompletionMessage* done) {
  done->batch_id = msg.batch_id;
  done->slot = msg.slot;
  done->kind = shm::CompletionKind::kDone;
  done->num_tensors = 0;
  done->compute_ns = 0;
  done->rows = 0;
  done->step_rows = 0;
  done->stages_done = 0;
  done->num_stages = 0;
  done->error[0] = '\0';
}

void FailCompletion(const Status& status, shm::CompletionMessage* done) {
  done->num_tensors = 0;
  done->status = status.code() == StatusCode::kUnavailable ? shm::CompletionStatus::kUnavailable
                                                           : shm::CompletionStatus::kError;
  const std::string text = status.message();
  const size_t n = std::min(text.size(), shm::kErrorTextSize - 1);
  std::memcpy(done->error, text.data(), n);
  done->error[n] = '\0';
  PACKRAT_LOG(WARNING) << "batch " << done->batch_id << " failed: " << text;
}

}  // namespace packrat::runtime
