// The KServe v2 request decoder (JSON tensors, the binary tensor extension and references into
// system shared memory) on arbitrary bytes, against a signature with every kind of input: fixed
// and variable dims, several datatypes. The first byte picks JSON or binary framing and where
// the JSON header ends. Requests may reference region "r" (4 KiB of the object
// /pkrt-fuzz-decode) and "z" (bytes 100..116 of it). The same bytes go to the register body's
// parser too, and what it accepts is registered, within that object only (key_prefix), and
// unregistered.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/kserve/kserve_codec.h"
#include "agent/kserve/shared_memory_json.h"

namespace {

const packrat::ModelSignature& Signature() {
  static const packrat::ModelSignature sig = [] {
    packrat::ModelSignature s;
    s.name = "m";
    s.max_batch = 64;
    s.inputs = {{"x", packrat::DataType::kFp32, {-1, 4}},
                {"ids", packrat::DataType::kInt64, {-1, -1}},
                {"mask", packrat::DataType::kBool, {-1, 2, 2}},
                {"h", packrat::DataType::kFp16, {-1}}};
    s.outputs = {{"y", packrat::DataType::kFp32, {-1, 3}}};
    return s;
  }();
  return sig;
}

// An object of 8 KiB with regions "r" and "z"; unlinked at exit.
packrat::SharedMemoryRegistry& Regions() {
  static const std::string object = "/pkrt-fuzz-decode";
  static packrat::SharedMemoryRegistry regions = [] {
    const int fd = shm_open(object.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 8192) != 0) __builtin_trap();
    close(fd);
    std::atexit([] { shm_unlink(object.c_str()); });
    return packrat::SharedMemoryRegistry(
        {.enabled = true, .key_prefix = object.substr(1), .dir = "/dev/shm"});
  }();
  static const bool registered =
      regions.Register("r", object, 0, 4096).ok() && regions.Register("z", object, 100, 16).ok();
  if (!registered) __builtin_trap();
  return regions;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  auto body =
      std::make_shared<const std::string>(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<size_t> header_length;
  if (mode & 1) header_length = (mode >> 1) * body->size() / 127;  // binary framing
  packrat::SharedMemoryRegistry& regions = Regions();
  auto decoded = packrat::DecodeInferRequest(Signature(), body, header_length, &regions);
  if (decoded.ok()) {
    // Whatever was accepted must be consistent: every input has the batch's rows.
    for (const auto& in : decoded->inputs) {
      if (in.shape.empty() || in.shape[0] != decoded->rows) __builtin_trap();
    }
  }
  if (auto reg = packrat::ParseSharedMemoryRegisterBody(*body); reg.ok()) {
    if (regions.Register("fuzz", reg->key, reg->offset, reg->byte_size).ok() &&
        !regions.Unregister("fuzz").ok()) {
      __builtin_trap();
    }
  }
  return 0;
}
