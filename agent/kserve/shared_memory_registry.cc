#include "agent/kserve/shared_memory_registry.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "agent/kserve/request_validation.h"

namespace packrat {
namespace {

// The agent's own objects (its rings and slabs: shm/segment.h, Segment::MakeName) and those of
// any other agent on the node. A client may not map them through the agent.
constexpr std::string_view kAgentObjectPrefix = "packrat.";
// A region name travels in URLs and logs; longer ones are refused.
constexpr size_t kMaxNameLength = 255;

std::string Errno(int error) { return std::strerror(error); }

Status CheckName(std::string_view name) {
  if (name.empty()) return InvalidArgument("a shared-memory region needs a name");
  if (name.size() > kMaxNameLength) {
    return InvalidArgument("shared-memory region name longer than " +
                           std::to_string(kMaxNameLength) + " characters");
  }
  return Status::Ok();
}

// The object name of `key` (without its leading '/'), checked as shm_open names are.
StatusOr<std::string_view> ObjectName(std::string_view key, const SharedMemoryOptions& options) {
  std::string_view object = key;
  if (!object.empty() && object.front() == '/') object.remove_prefix(1);
  const std::string quoted = Quoted(key);
  if (object.empty() || object.size() > NAME_MAX || object == "." || object == "..") {
    return InvalidArgument("shared-memory key " + quoted +
                           " must name an object: '/name', at most " + std::to_string(NAME_MAX) +
                           " characters");
  }
  if (object.find('/') != std::string_view::npos || object.find('\0') != std::string_view::npos) {
    return InvalidArgument("shared-memory key " + quoted + " may hold no '/' after the first");
  }
  if (object.substr(0, kAgentObjectPrefix.size()) == kAgentObjectPrefix) {
    return InvalidArgument("shared-memory key " + quoted +
                           " names one of the agent's own objects (packrat.*)");
  }
  if (object.substr(0, options.key_prefix.size()) != options.key_prefix) {
    return InvalidArgument("shared-memory key " + quoted + " is outside this agent's prefix " +
                           Quoted(options.key_prefix) + " (server.shared_memory.key_prefix)");
  }
  return object;
}

}  // namespace

SharedMemoryRegion::SharedMemoryRegion(std::string name, std::string key, uint64_t offset,
                                       uint64_t byte_size, int fd, void* map, size_t map_length,
                                       uint8_t* data)
    : name_(std::move(name)),
      key_(std::move(key)),
      offset_(offset),
      byte_size_(byte_size),
      fd_(fd),
      map_(map),
      map_length_(map_length),
      data_(data) {}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(map_, map_length_);
  close(fd_);
}

Status SharedMemoryRegion::CheckObjectSize() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    return InvalidArgument("shared-memory region " + Quoted(name_) + ": " + Errno(errno));
  }
  if (static_cast<uint64_t>(st.st_size) < offset_ + byte_size_) {
    return InvalidArgument("shared-memory region " + Quoted(name_) + ": object " + Quoted(key_) +
                           " shrank to " + std::to_string(st.st_size) +
                           " bytes since it was registered; register it again");
  }
  return Status::Ok();
}

SharedMemoryRegistry::SharedMemoryRegistry(SharedMemoryOptions options)
    : options_(std::move(options)) {}

Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key,
                                      uint64_t offset, uint64_t byte_size) {
  if (!options_.enabled) {
    return Unavailable(std::string(kSharedMemoryOff));
  }
  RETURN_IF_ERROR(CheckName(name));
  ASSIGN_OR_RETURN(const std::string_view object, ObjectName(key, options_));
  uint64_t end = 0;
  if (byte_size == 0) {
    return InvalidArgument("shared-memory region " + Quoted(name) + ": byte_size must be positive");
  }
  if (__builtin_add_overflow(offset, byte_size, &end) ||
      end > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return InvalidArgument("shared-memory region " + Quoted(name) + ": offset " +
                           std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
                           " is too large");
  }
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(RoomFor(name));
  }

  // What shm_open does (glibc opens /dev/shm/NAME), in the configured folder; never through a
  // symbolic link a client planted there.
  const std::string path = options_.dir + "/" + std::string(object);
  const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string what = "shared-memory object " + Quoted(key) + " (" + path + ")";
    return error == ENOENT ? NotFound("no " + what)
                           : InvalidArgument("cannot open " + what + ": " + Errno(error));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument("shared-memory object " + Quoted(key) + " is not a memory object");
  }
  if (static_cast<uint64_t>(st.st_size) < end) {
    close(fd);
    return InvalidArgument("shared-memory region " + Quoted(name) + ": bytes [" +
                           std::to_string(offset) + ", " + std::to_string(end) + ") of " +
                           Quoted(key) + " lie beyond its " + std::to_string(st.st_size) +
                           " bytes");
  }
  // mmap takes a page-aligned offset: map from the page that holds `offset`.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset - offset % page;
  const size_t map_length = static_cast<size_t>(end - map_offset);
  void* map = mmap(nullptr, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(map_offset));
  if (map == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return InvalidArgument("cannot map shared-memory object " + Quoted(key) + ": " + Errno(error));
  }
  auto region =
      std::make_shared<SharedMemoryRegion>(name, key, offset, byte_size, fd, map, map_length,
                                           static_cast<uint8_t*>(map) + (offset - map_offset));

  MutexLock lock(&mu_);  // checked again: another call may have taken the name meanwhile
  RETURN_IF_ERROR(RoomFor(name));
  regions_.emplace(name, std::move(region));
  return Status::Ok();
}

Status SharedMemoryRegistry::RoomFor(const std::string& name) const {
  if (regions_.count(name) != 0) {
    return AlreadyExists("shared-memory region " + Quoted(name) + " is already registered");
  }
  if (regions_.size() >= kMaxRegions) {
    return ResourceExhausted("at most " + std::to_string(kMaxRegions) +
                             " shared-memory regions may be registered; unregister one first");
  }
  return Status::Ok();
}

Status SharedMemoryRegistry::Unregister(std::string_view name) {
  // A lease is only taken under mu_ (Resolve), so a count of one seen here stays one.
  auto in_use = [](const std::shared_ptr<SharedMemoryRegion>& region) {
    return region.use_count() > 1;
  };
  auto busy = [](std::string_view region) {
    return Aborted("shared-memory region " + Quoted(region) +
                   " is in use by requests in flight; unregister it once they are answered");
  };
  MutexLock lock(&mu_);
  if (name.empty()) {
    for (const auto& [region_name, region] : regions_) {
      if (in_use(region)) return busy(region_name);
    }
    regions_.clear();
    return Status::Ok();
  }
  const auto it = regions_.find(name);
  if (it == regions_.end()) {
    return NotFound("no shared-memory region " + Quoted(name) + " is registered");
  }
  if (in_use(it->second)) return busy(name);
  regions_.erase(it);
  return Status::Ok();
}

StatusOr<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::Regions(
    std::string_view name) const {
  std::vector<SharedMemoryRegionStatus> out;
  MutexLock lock(&mu_);
  for (const auto& [region_name, region] : regions_) {
    if (!name.empty() && region_name != name) continue;
    out.push_back({region->name(), region->key(), region->offset(), region->byte_size()});
  }
  if (!name.empty() && out.empty()) {
    return NotFound("no shared-memory region " + Quoted(name) + " is registered");
  }
  return out;
}

StatusOr<SharedMemorySpan> SharedMemoryRegistry::Resolve(const SharedMemoryRef& ref,
                                                         std::string_view what) const {
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    MutexLock lock(&mu_);
    const auto it = regions_.find(ref.region);
    if (it != regions_.end()) region = it->second;
  }
  if (region == nullptr) {
    return InvalidArgument(std::string(what) + ": no shared-memory region " + Quoted(ref.region) +
                           " is registered");
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(ref.offset, ref.byte_size, &end) || end > region->byte_size()) {
    return InvalidArgument(
        std::string(what) + ": shared_memory_offset " + std::to_string(ref.offset) +
        " + shared_memory_byte_size " + std::to_string(ref.byte_size) + " lies beyond region " +
        Quoted(ref.region) + "'s " + std::to_string(region->byte_size()) + " bytes");
  }
  RETURN_IF_ERROR(region->CheckObjectSize());
  return SharedMemorySpan{region, region->data() + ref.offset, ref.byte_size, ref.offset};
}

}  // namespace packrat
