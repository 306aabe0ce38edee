#include "agent/batching/slice_io.h"

#include <cstring>

namespace packrat {

Status GatherInputs(const WorkSlice& slice, uint8_t* slab, size_t capacity,
                    std::vector<TensorView>* inputs) {
  inputs->clear();
  if (slice.ranges.empty()) return InvalidArgument("empty slice");
  const auto& first = slice.ranges.front().request->decoded().inputs;
  size_t offset = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const TensorView& proto = first[i];
    const size_t row_bytes = proto.byte_size / static_cast<size_t>(proto.shape[0]);
    const size_t bytes = row_bytes * static_cast<size_t>(slice.rows);
    offset = (offset + 63) / 64 * 64;
    if (offset + bytes > capacity) {
      return ResourceExhausted("batch of " + std::to_string(slice.rows) + " rows needs more than " +
                               "the instance's " + std::to_string(capacity) + "-byte input slab");
    }
    uint8_t* dst = slab + offset;
    for (const RowRange& range : slice.ranges) {
      const TensorView& src = range.request->decoded().inputs[i];
      std::memcpy(dst, src.data + range.begin * row_bytes, range.rows * row_bytes);
      dst += range.rows * row_bytes;
    }
    TensorView view;
    view.name = proto.name;
    view.datatype = proto.datatype;
    view.shape = proto.shape;
    view.shape[0] = slice.rows;
    view.data = slab + offset;
    view.byte_size = bytes;
    inputs->push_back(std::move(view));
    offset += bytes;
  }
  return Status::Ok();
}

void ScatterOutputs(const WorkSlice& slice, const std::vector<TensorView>& outputs) {
  int64_t row = 0;
  for (const RowRange& range : slice.ranges) {
    range.request->DeliverRows(range.begin, range.rows, outputs, row);
    row += range.rows;
  }
}

void FailSlice(const WorkSlice& slice, const Status& status) {
  for (const RowRange& range : slice.ranges) range.request->FailRows(range.rows, status);
}

}  // namespace packrat
