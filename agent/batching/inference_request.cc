#include "agent/batching/inference_request.h"

#include <cstring>

namespace packrat {

InferenceRequest::InferenceRequest(DecodedRequest decoded, Callback done, SteadyTime arrival)
    : decoded_(std::move(decoded)),
      done_(std::move(done)),
      arrival_(arrival),
      rows_pending_(decoded_.rows) {}

bool InferenceRequest::CompatibleWith(const InferenceRequest& other) const {
  const auto& a = decoded_.inputs;
  const auto& b = other.decoded_.inputs;
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape.size() != b[i].shape.size()) return false;
    for (size_t d = 1; d < a[i].shape.size(); ++d) {
      if (a[i].shape[d] != b[i].shape[d]) return false;
    }
  }
  return true;
}

void InferenceRequest::DeliverRows(int64_t begin, int64_t count,
                                   const std::vector<TensorView>& outputs, int64_t batch_row) {
  CopyRows(begin, count, outputs, batch_row);
  FinishRows(count);
}

void InferenceRequest::CopyRows(int64_t begin, int64_t count,
                                const std::vector<TensorView>& outputs, int64_t batch_row) {
  {
    MutexLock lock(&mu_);
    if (status_.ok()) {
      if (outputs_.empty()) outputs_.resize(outputs.size());
      for (size_t i = 0; i < outputs.size() && status_.ok(); ++i) {
        const TensorView& out = outputs[i];
        if (out.shape.empty() || out.shape[0] < batch_row + count) {
          status_ = Internal("model output '" + out.name + "' has shape " +
                             ShapeToString(out.shape) + ", which lacks the batch's rows");
          break;
        }
        const size_t row_bytes = out.shape[0] == 0 ? 0 : out.byte_size / out.shape[0];
        Tensor& dst = outputs_[i];
        if (dst.shape.empty()) {  // the first slice: shape and buffer (maybe of no bytes)
          dst.name = out.name;
          dst.datatype = out.datatype;
          dst.shape = out.shape;
          dst.shape[0] = rows();
          dst.bytes.resize(row_bytes * rows());
        } else if (dst.datatype != out.datatype ||
                   dst.bytes.size() != row_bytes * static_cast<size_t>(rows()) ||
                   !std::equal(dst.shape.begin() + 1, dst.shape.end(), out.shape.begin() + 1,
                               out.shape.end())) {
          status_ = Internal("model output '" + out.name + "' changed shape between slices");
          break;
        }
        if (row_bytes == 0) continue;  // a zero-sized output has no buffer to copy
        std::memcpy(dst.bytes.data() + begin * row_bytes, out.data + batch_row * row_bytes,
                    count * row_bytes);
      }
    }
  }
}

void InferenceRequest::FailRows(int64_t count, const Status& status) {
  {
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = status;
  }
  FinishRows(count);
}

void InferenceRequest::FinishRows(int64_t count) {
  if (rows_finished_) rows_finished_(count);
  if (rows_pending_.fetch_sub(count, std::memory_order_acq_rel) != count) return;
  Status final_status;
  {
    MutexLock lock(&mu_);
    final_status = status_;
  }
  done_(final_status, *this);
}

void InferenceRequest::ReleaseSharedMemory() {
  decoded_.input_regions.clear();
  for (RequestedOutput& output : decoded_.outputs) output.region.reset();
}

}  // namespace packrat
