// SharedMemoryRegistry: the system shared-memory regions clients on the node registered (the
// system shared-memory extension of KServe v2 / Triton). A client places tensors in a region and
// sends only references; the agent reads inputs from the region straight into a runtime's slab
// and writes outputs into the client's region. No tensor crosses the socket.
//
// A region is (name, key, offset, byte_size): `key` names a POSIX shared-memory object
// (shm_open's name, as Triton's clients create them; opened in SharedMemoryOptions::dir, which
// is where shm_open keeps them unless configured), and the region is its bytes
// [offset, offset + byte_size). Register maps them once; requests name the region and an offset
// and size within it (SharedMemoryRef), which Resolve checks against the region.
//
// Safety:
//  - Keys of the agent's own objects (`packrat.*`) are refused, and with
//    `server.shared_memory.key_prefix` only keys whose name starts with it are taken.
//  - Every reference is checked against the region's bounds, without overflow.
//  - A resolved span holds a lease on its region: the region stays mapped, and Unregister
//    refuses it (kAborted), until every request that holds one has answered.
//  - An object shrunk after Register would turn a read of the lost pages into SIGBUS. Resolve
//    checks the object's size at each lease and refuses a shrunk one; a client that shrinks its
//    object while a request reads it can still end the agent: the kernel offers no guard for
//    shm_open objects (a sealed memfd passed over a Unix socket would be one; not built).
//
// Thread-safety: every method may be called from any thread; a mutex guards the map.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace packrat {

// One registered region: its mapping, unmapped and closed when the last holder lets go.
class SharedMemoryRegion {
 public:
  SharedMemoryRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size, int fd,
                     void* map, size_t map_length, uint8_t* data);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }  // of the region within the object
  uint64_t byte_size() const { return byte_size_; }
  // The region's first byte (the object's byte `offset()`).
  uint8_t* data() const { return data_; }
  // OK while the object still holds the whole region; kInvalidArgument once it shrank.
  Status CheckObjectSize() const;

 private:
  const std::string name_;
  const std::string key_;
  const uint64_t offset_;
  const uint64_t byte_size_;
  const int fd_;
  void* const map_;
  const size_t map_length_;
  uint8_t* const data_;
};

// A request's reference into a region: its `shared_memory_region`, `shared_memory_byte_size`
// and `shared_memory_offset` parameters.
struct SharedMemoryRef {
  std::string region;
  uint64_t byte_size = 0;
  uint64_t offset = 0;  // within the region
};

// Bytes a reference resolved to. `region` keeps them mapped (and the region registered).
struct SharedMemorySpan {
  std::shared_ptr<const SharedMemoryRegion> region;
  uint8_t* data = nullptr;
  uint64_t byte_size = 0;
  uint64_t offset = 0;  // within the region, as the reference gave it
};

// What the status call reports of a region.
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// What every front end says of a request for the extension while it is off.
inline constexpr std::string_view kSharedMemoryOff =
    "system shared memory is off on this agent (server.shared_memory)";

struct SharedMemoryOptions {
  bool enabled = true;
  // Only keys whose object name (the key without its leading '/') starts with this.
  std::string key_prefix;
  // The folder the objects' names are in: /dev/shm, where shm_open puts them, or the folder
  // where the clients' /dev/shm is mounted (a hostPath the agent's pod mounts elsewhere, so
  // that its own /dev/shm, with its runtimes' rings, stays private).
  std::string dir = "/dev/shm";
};

class SharedMemoryRegistry {
 public:
  explicit SharedMemoryRegistry(SharedMemoryOptions options = {});

  bool enabled() const { return options_.enabled; }

  // Maps bytes [offset, offset + byte_size) of the object `key` as region `name`.
  // kInvalidArgument: a bad name or key (empty, too long, a key with '/' inside or of the
  // agent's own objects, outside key_prefix), byte_size 0, or a range beyond the object's size;
  // kNotFound: no such object; kAlreadyExists: the name is taken; kResourceExhausted: at
  // kMaxRegions; kUnavailable: the extension is off.
  Status Register(const std::string& name, const std::string& key, uint64_t offset,
                  uint64_t byte_size);
  // Forgets region `name` (every region when empty). kNotFound for an unknown name; kAborted,
  // changing nothing, while a request holds a lease on it (on any, for all).
  Status Unregister(std::string_view name);
  // The region `name`, or every region (by name) when empty. kNotFound for an unknown name.
  StatusOr<std::vector<SharedMemoryRegionStatus>> Regions(std::string_view name) const;
  // Checks `ref` against its region and leases the bytes. `what` names the tensor in errors
  // ("input 'x'"). kInvalidArgument: no such region, a range beyond it, a shrunk object.
  StatusOr<SharedMemorySpan> Resolve(const SharedMemoryRef& ref, std::string_view what) const;

  // Regions at most: each holds a mapping and a file descriptor.
  static constexpr size_t kMaxRegions = 1024;

 private:
  // OK where `name` is free and a region more fits; else AlreadyExists or ResourceExhausted.
  Status RoomFor(const std::string& name) const REQUIRES(mu_);

  const SharedMemoryOptions options_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<SharedMemoryRegion>, std::less<>> regions_ GUARDED_BY(mu_);
};

}  // namespace packrat
