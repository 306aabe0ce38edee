// What packrat-runtime reads from shared memory written by another process: the segment header
// and ring headers (Segment::ValidateMapping) and each BatchMessage (UnpackBatchMessage).
//
// Input: a BatchMessage image, then patches (offset, byte) applied to a valid segment image
// built once at start-up, so that mutations start from a segment the runtime accepts and reach
// every check of both parsers. A message that passes must only describe bytes inside its slab.
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/batch_message.h"
#include "shm/segment.h"

namespace {

struct Template {
  std::vector<uint8_t> bytes;
  uint32_t num_slots = 0;
  uint64_t capacity = 0;
};

const Template& ValidSegment() {
  static const Template t = [] {
    Template out;
    packrat::shm::SegmentOptions options;
    options.num_slots = 2;
    options.ring_capacity = 8;
    options.slot_input_bytes = 4096;
    options.slot_output_bytes = 1024;
    const std::string name = packrat::shm::Segment::MakeName(getpid(), "fuzz");
    auto segment = packrat::shm::Segment::Create(name, options);
    if (!segment.ok()) std::abort();
    const auto* header = (*segment)->header();
    out.bytes.assign(reinterpret_cast<const uint8_t*>(header),
                     reinterpret_cast<const uint8_t*>(header) + header->segment_size);
    out.num_slots = (*segment)->num_slots();
    out.capacity = (*segment)->input_capacity();
    return out;  // the segment is removed here; its image stays
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Template& valid = ValidSegment();
  // 1. The message against the valid segment's geometry.
  packrat::shm::BatchMessage msg;
  std::memset(&msg, 0, sizeof(msg));
  std::memcpy(&msg, data, std::min(size, sizeof(msg)));
  std::vector<uint8_t> slab(valid.capacity);
  std::vector<packrat::runtime::RawTensor> inputs;
  const packrat::Status s = packrat::runtime::UnpackBatchMessage(
      msg, valid.num_slots, valid.capacity, [&](uint32_t) { return slab.data(); }, &inputs);
  if (s.ok()) {
    for (const auto& t : inputs) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      if (p < slab.data() || p + t.byte_size > slab.data() + slab.size()) __builtin_trap();
    }
  }
  // 2. The patched segment image (64-byte aligned, as a mapping is).
  if (size <= sizeof(msg)) return 0;
  const size_t n = valid.bytes.size();
  auto* image = static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64));
  std::memcpy(image, valid.bytes.data(), n);
  for (size_t i = sizeof(msg); i + 2 < size; i += 3) {
    const size_t offset = (static_cast<size_t>(data[i]) << 8 | data[i + 1]) % n;
    image[offset] = data[i + 2];
  }
  // Also try a truncated mapping when the last byte says so.
  const size_t mapped = (data[size - 1] & 0x80) ? n : n - (data[size - 1] % 64);
  (void)packrat::shm::Segment::ValidateMapping(image, mapped);
  std::free(image);
  return 0;
}
