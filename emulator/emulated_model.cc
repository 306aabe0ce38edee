#include "emulator/emulated_model.h"

#include <cmath>
#include <cstring>

namespace packrat::emulator {

StatusOr<EmulatedModel> EmulatedModel::Create(Profile profile, int threads,
                                              std::vector<OutputSpec> outputs) {
  if (!profile.InterpolatedLatency(threads, 1)) {
    return FailedPrecondition("the profile has no point at " + std::to_string(threads) +
                              " thread(s): an instance of that shape cannot be emulated");
  }
  if (outputs.size() > static_cast<size_t>(shm::kMaxTensors)) {
    return InvalidArgument("more than " + std::to_string(shm::kMaxTensors) + " outputs");
  }
  for (const OutputSpec& o : outputs) {
    if (DataTypeSize(o.datatype) == 0) return InvalidArgument("an output has no datatype");
    if (o.row_shape.size() + 1 > static_cast<size_t>(shm::kMaxDims)) {
      return InvalidArgument("an output's rank exceeds " + std::to_string(shm::kMaxDims));
    }
  }
  return EmulatedModel(std::move(profile), threads, std::move(outputs));
}

std::chrono::nanoseconds EmulatedModel::Latency(int64_t rows) const {
  const std::optional<double> ms =
      profile_.InterpolatedLatency(threads_, std::max<int64_t>(1, rows));
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ms.value_or(0) * 1e6)));
}

Status EmulatedModel::WriteOutputs(int64_t rows, uint8_t* out, uint64_t capacity,
                                   const std::function<Status(uint64_t bytes)>& back,
                                   shm::CompletionMessage* done) const {
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  uint64_t end = 0;
  for (const OutputSpec& o : outputs_) {
    uint64_t elements = static_cast<uint64_t>(std::max<int64_t>(0, rows));
    for (int64_t d : o.row_shape) elements *= static_cast<uint64_t>(d < 1 ? 1 : d);
    const uint64_t bytes = elements * DataTypeSize(o.datatype);
    const uint64_t offset = shm::AlignUp(end);
    if (offset > capacity || bytes > capacity - offset) {
      return ResourceExhausted("the outputs of " + std::to_string(rows) +
                               " row(s) do not fit the output slab (" + std::to_string(capacity) +
                               " bytes)");
    }
    offsets.push_back(offset);
    sizes.push_back(bytes);
    end = offset + bytes;
  }
  if (back) RETURN_IF_ERROR(back(end));
  for (size_t i = 0; i < outputs_.size(); ++i) {
    std::memset(out + offsets[i], 0, sizes[i]);
    shm::TensorDesc& d = done->tensors[i];
    std::memset(&d, 0, sizeof(d));
    d.datatype = static_cast<uint8_t>(outputs_[i].datatype);
    d.ndim = static_cast<uint8_t>(outputs_[i].row_shape.size() + 1);
    d.shape[0] = rows;
    for (size_t k = 0; k < outputs_[i].row_shape.size(); ++k) {
      d.shape[k + 1] = outputs_[i].row_shape[k] < 1 ? 1 : outputs_[i].row_shape[k];
    }
    d.offset = offsets[i];
    d.byte_size = sizes[i];
  }
  done->num_tensors = static_cast<uint32_t>(outputs_.size());
  return Status::Ok();
}

}  // namespace packrat::emulator
