#include "agent/batching/slice_io.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

namespace packrat {

uint64_t SlabBytes(const std::vector<TensorSpec>& specs, int64_t rows, uint64_t variable_bytes) {
  uint64_t total = 0;
  for (const TensorSpec& s : specs) {
    const int64_t row = s.RowBytes();
    const uint64_t bytes = row < 0 ? variable_bytes : static_cast<uint64_t>(row) * rows;
    total += (bytes + kSlabAlign - 1) / kSlabAlign * kSlabAlign + kSlabAlign;
  }
  return total;
}

uint64_t RowBytesOf(const TensorView& input) {
  return input.shape[0] > 0 ? input.byte_size / static_cast<uint64_t>(input.shape[0]) : 0;
}

int64_t RowsThatFit(const InferenceRequest& request, uint64_t capacity) {
  // GatherInputs aligns each input's start: at most kAlign - 1 bytes of padding before each.
  const auto& inputs = request.decoded().inputs;
  const uint64_t padding = inputs.size() * (kSlabAlign - 1);
  if (capacity < padding) return 0;
  uint64_t row_bytes = 0;
  for (const TensorView& t : inputs) row_bytes += RowBytesOf(t);
  if (row_bytes == 0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(
      std::min<uint64_t>((capacity - padding) / row_bytes, std::numeric_limits<int64_t>::max()));
}

uint64_t SliceInputBytes(const WorkSlice& slice) {
  if (slice.ranges.empty()) return 0;
  uint64_t end = 0;
  for (const TensorView& proto : slice.ranges.front().request->decoded().inputs) {
    end = (end + kSlabAlign - 1) / kSlabAlign * kSlabAlign +
          RowBytesOf(proto) * static_cast<uint64_t>(slice.rows);
  }
  return end;
}

Status GatherInputs(const WorkSlice& slice, uint8_t* slab, size_t capacity,
                    std::vector<TensorView>* inputs) {
  inputs->clear();
  if (slice.ranges.empty()) return InvalidArgument("empty slice");
  if (SliceInputBytes(slice) > capacity) {
    return OutOfRange("a slice of " + std::to_string(slice.rows) + " row(s) needs more than " +
                      "the instance's " + std::to_string(capacity) + "-byte input slab");
  }
  const auto& first = slice.ranges.front().request->decoded().inputs;
  size_t offset = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const TensorView& proto = first[i];
    const size_t row_bytes = RowBytesOf(proto);
    const size_t bytes = row_bytes * static_cast<size_t>(slice.rows);
    offset = (offset + kSlabAlign - 1) / kSlabAlign * kSlabAlign;
    uint8_t* dst = slab + offset;
    for (const RowRange& range : slice.ranges) {
      const TensorView& src = range.request->decoded().inputs[i];
      const size_t n = range.rows * row_bytes;
      if (n == 0) continue;  // an input with a zero-sized dim may have no buffer at all
      std::memcpy(dst, src.data + range.begin * row_bytes, n);
      dst += n;
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

std::vector<WorkSlice> SplitByRange(WorkSlice slice) {
  std::vector<WorkSlice> parts;
  auto left = std::make_shared<std::atomic<size_t>>(slice.ranges.size());
  auto done = std::make_shared<std::function<void()>>(std::move(slice.on_done));
  for (RowRange& range : slice.ranges) {
    WorkSlice part;
    part.batch_id = slice.batch_id;
    part.rows = range.rows;
    part.retried = slice.retried;
    part.ranges.push_back(std::move(range));
    part.on_done = [left, done] {
      if (left->fetch_sub(1) == 1 && *done) (*done)();
    };
    parts.push_back(std::move(part));
  }
  return parts;
}

void ScatterOutputs(const WorkSlice& slice, const std::vector<TensorView>& outputs,
                    const std::function<void()>& copied) {
  int64_t row = 0;
  for (const RowRange& range : slice.ranges) {
    range.request->CopyRows(range.begin, range.rows, outputs, row);
    row += range.rows;
  }
  if (copied) copied();
  for (const RowRange& range : slice.ranges) range.request->FinishRows(range.rows);
}

void FailSlice(const WorkSlice& slice, const Status& status) {
  for (const RowRange& range : slice.ranges) range.request->FailRows(range.rows, status);
}

Status CheckRowFits(const InferenceRequest& request, uint64_t smallest_slab, std::string_view model,
                    int64_t variable_bytes) {
  if (smallest_slab == 0 || RowsThatFit(request, smallest_slab) >= 1) return Status::Ok();
  uint64_t total = 0;
  std::string each;
  for (const TensorView& t : request.decoded().inputs) {
    const uint64_t row = RowBytesOf(t);
    total += row;
    if (!each.empty()) each += ", ";
    each += "'" + t.name + "' " + std::to_string(row);
  }
  return OutOfRange("one row of the inputs takes " + std::to_string(total) + " bytes (" + each +
                    "); a slice of model '" + std::string(model) + "' carries at most " +
                    std::to_string(variable_bytes) +
                    " bytes of each input whose row size varies (batching.variable_tensor_bytes)");
}

}  // namespace packrat
