// The REST messages of the system shared-memory extension (KServe v2 / Triton):
//   POST /v2/systemsharedmemory/region/{r}/register   {"key": K, "offset": O, "byte_size": N}
//   GET  /v2/systemsharedmemory[/region/{r}]/status   -> [{"name","key","offset","byte_size"}]
//   POST /v2/systemsharedmemory[/region/{r}]/unregister
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kserve/shared_memory_registry.h"
#include "common/status.h"

namespace packrat {

struct SharedMemoryRegisterBody {
  std::string key;
  uint64_t offset = 0;  // optional in the body
  uint64_t byte_size = 0;
};

// Parses a register body. kInvalidArgument naming the offending field; unknown fields are
// ignored (Triton's clients send none).
StatusOr<SharedMemoryRegisterBody> ParseSharedMemoryRegisterBody(std::string_view body);

// The status response: a JSON array of the regions, by name.
std::string SharedMemoryStatusJson(const std::vector<SharedMemoryRegionStatus>& regions);

}  // namespace packrat
