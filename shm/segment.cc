#include "shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "shm/futex.h"

namespace packrat::shm {
namespace bip = boost::interprocess;

namespace {

constexpr char kPrefix[] = "packrat.";

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// posix_fallocate: backs [offset, offset + bytes) of shared-memory object `fd` with memory.
// A full /dev/shm (ENOSPC) or memory limit (ENOMEM) is kUnavailable: the server lacks room, and
// the operator, not the client, can make more.
Status Back(int fd, uint64_t offset, uint64_t bytes, const std::string& name) {
  const int rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (rc == 0) return Status::Ok();
  const std::string what = std::to_string(bytes) + " more bytes of tensors";
  if (rc == ENOSPC) {
    return Unavailable("no room in shared memory (/dev/shm) for " + what +
                       "; give /dev/shm more room (the chart's shm.sizeLimit) or the agent fewer "
                       "instances");
  }
  if (rc == ENOMEM) {
    return Unavailable("the memory limit is reached backing " + what +
                       " in shared memory; raise it (it covers /dev/shm) or give the agent fewer "
                       "instances");
  }
  return Internal("cannot back " + what + " of segment '" + name + "': " + std::strerror(rc));
}

// At most one top-up query is outstanding per runtime; two entries leave room for a late one.
constexpr uint32_t kTopUpRingCapacity = 2;

}  // namespace

const std::string& Segment::Incarnation() {
  static const std::string incarnation = [] {
    std::random_device random;
    std::uniform_int_distribution<uint32_t> draw;
    char text[9];
    std::snprintf(text, sizeof(text), "%08x", draw(random));
    return std::string(text);
  }();
  return incarnation;
}

std::string Segment::MakeName(pid_t agent_pid, const std::string& tag,
                              const std::string& incarnation) {
  std::string name = kPrefix + std::to_string(agent_pid) + "." + incarnation + ".";
  for (char c : tag) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    name += ok ? c : '_';
  }
  return name;
}

Segment::Segment(std::string name, std::unique_ptr<bip::mapped_region> region, int fd, bool owner,
                 SpscRing<BatchMessage> requests, SpscRing<CompletionMessage> completions,
                 SpscRing<BatchMessage> topups)
    : name_(std::move(name)),
      region_(std::move(region)),
      fd_(fd),
      owner_(owner),
      header_(static_cast<SegmentHeader*>(region_->get_address())),
      num_slots_(header_->num_slots),
      slots_offset_(header_->slots_offset),
      slot_input_bytes_(header_->slot_input_bytes),
      slot_output_bytes_(header_->slot_output_bytes),
      input_backed_(num_slots_, 0),
      output_backed_(num_slots_, 0),
      requests_(requests),
      completions_(completions),
      topups_(topups) {}

Segment::~Segment() {
  region_.reset();
  if (fd_ >= 0) close(fd_);
  if (owner_) bip::shared_memory_object::remove(name_.c_str());
}

StatusOr<std::unique_ptr<Segment>> Segment::Create(const std::string& name,
                                                   const SegmentOptions& options) {
  if (options.num_slots == 0) return InvalidArgument("segment needs at least one slot");
  if (!IsPowerOfTwo(options.ring_capacity) || options.ring_capacity < options.num_slots) {
    return InvalidArgument("ring capacity must be a power of two >= num_slots");
  }
  const uint64_t header_bytes = AlignUp(sizeof(SegmentHeader));
  const uint64_t req_off = header_bytes;
  const uint64_t comp_off = req_off + SpscRing<BatchMessage>::BytesFor(options.ring_capacity);
  const uint64_t topup_off =
      comp_off + SpscRing<CompletionMessage>::BytesFor(options.ring_capacity);
  // Slabs start on a page boundary so tensors are well aligned for vectorised kernels.
  const uint64_t slots_off =
      AlignUp(topup_off + SpscRing<BatchMessage>::BytesFor(kTopUpRingCapacity), 4096);
  const uint64_t in_bytes = AlignUp(options.slot_input_bytes, 4096);
  const uint64_t out_bytes = AlignUp(options.slot_output_bytes, 4096);
  const uint64_t total = slots_off + options.num_slots * (in_bytes + out_bytes);

  bool created = false;  // only a segment this call created may be removed on failure
  try {
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write);
    created = true;
    shm.truncate(static_cast<bip::offset_t>(total));
    // The header and the rings are written from now on; only the slabs stay sparse (Reserve).
    if (Status s = Back(shm.get_mapping_handle().handle, 0, slots_off, name); !s.ok()) {
      bip::shared_memory_object::remove(name.c_str());
      return s;
    }
    auto region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
    char* base = static_cast<char*>(region->get_address());
    auto* header = new (base) SegmentHeader();
    header->magic = kSegmentMagic;
    header->version = kLayoutVersion;
    header->num_slots = options.num_slots;
    header->segment_size = total;
    header->request_ring_offset = req_off;
    header->completion_ring_offset = comp_off;
    header->topup_ring_offset = topup_off;
    header->slots_offset = slots_off;
    header->slot_input_bytes = in_bytes;
    header->slot_output_bytes = out_bytes;
    header->agent_pid = static_cast<int32_t>(getpid());
    header->runtime_pid.store(0, std::memory_order_relaxed);
    header->state.store(static_cast<uint32_t>(RuntimeState::kStarting), std::memory_order_relaxed);
    header->queued_rows_hint.store(0, std::memory_order_relaxed);
    header->decode_slots_limit.store(0, std::memory_order_relaxed);
    header->error[0] = '\0';
    header->info[0] = '\0';
    auto requests = SpscRing<BatchMessage>::Initialize(base + req_off, options.ring_capacity);
    auto completions =
        SpscRing<CompletionMessage>::Initialize(base + comp_off, options.ring_capacity);
    auto topups = SpscRing<BatchMessage>::Initialize(base + topup_off, kTopUpRingCapacity);
    const int fd = fcntl(shm.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      const int error = errno;
      bip::shared_memory_object::remove(name.c_str());
      return Internal("cannot keep shared memory segment '" + name +
                      "' open: " + std::strerror(error));
    }
    return std::unique_ptr<Segment>(
        new Segment(name, std::move(region), fd, /*owner=*/true, requests, completions, topups));
  } catch (const bip::interprocess_exception& e) {
    if (created) bip::shared_memory_object::remove(name.c_str());
    return Internal("cannot create shared memory segment '" + name + "': " + e.what());
  }
}

StatusOr<std::unique_ptr<Segment>> Segment::Open(const std::string& name) {
  bip::shared_memory_object shm;
  std::unique_ptr<bip::mapped_region> region;
  try {
    shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    return NotFound("cannot open shared memory segment '" + name + "': " + e.what());
  }
  const size_t size = region->get_size();
  RETURN_IF_ERROR(ValidateMapping(region->get_address(), size));
  auto* header = static_cast<SegmentHeader*>(region->get_address());
  char* base = static_cast<char*>(region->get_address());
  ASSIGN_OR_RETURN(auto requests, SpscRing<BatchMessage>::Attach(base + header->request_ring_offset,
                                                                 header->completion_ring_offset -
                                                                     header->request_ring_offset));
  ASSIGN_OR_RETURN(auto completions,
                   SpscRing<CompletionMessage>::Attach(
                       base + header->completion_ring_offset,
                       header->topup_ring_offset - header->completion_ring_offset));
  ASSIGN_OR_RETURN(auto topups, SpscRing<BatchMessage>::Attach(
                                    base + header->topup_ring_offset,
                                    header->slots_offset - header->topup_ring_offset));
  const int fd = fcntl(shm.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    return Internal("cannot keep shared memory segment '" + name +
                    "' open: " + std::strerror(error));
  }
  return std::unique_ptr<Segment>(
      new Segment(name, std::move(region), fd, /*owner=*/false, requests, completions, topups));
}

Status Segment::ValidateMapping(void* base_address, size_t size) {
  if (size < sizeof(SegmentHeader)) return InvalidArgument("segment smaller than its header");
  auto* header = static_cast<SegmentHeader*>(base_address);
  if (header->magic != kSegmentMagic) return InvalidArgument("segment has a bad magic number");
  if (header->version != kLayoutVersion) {
    return InvalidArgument("segment layout version " + std::to_string(header->version) +
                           ", this runtime speaks " + std::to_string(kLayoutVersion));
  }
  if (header->segment_size != size) return InvalidArgument("segment size does not match header");
  if (header->num_slots == 0 || header->num_slots > 1024) {
    return InvalidArgument("segment has a bad slot count");
  }
  // Every region must lie inside the mapping; compute in a way that cannot overflow.
  const uint64_t slot_bytes = header->slot_input_bytes + header->slot_output_bytes;
  if (header->slot_input_bytes > size || header->slot_output_bytes > size ||
      header->slots_offset > size || slot_bytes > size ||
      (slot_bytes != 0 && header->num_slots > (size - header->slots_offset) / slot_bytes) ||
      header->request_ring_offset < sizeof(SegmentHeader) ||
      header->request_ring_offset >= header->completion_ring_offset ||
      header->completion_ring_offset >= header->topup_ring_offset ||
      header->topup_ring_offset >= header->slots_offset) {
    return InvalidArgument("segment regions exceed its size");
  }
  if (header->request_ring_offset % kAlign != 0 || header->completion_ring_offset % kAlign != 0 ||
      header->topup_ring_offset % kAlign != 0 || header->slots_offset % kAlign != 0) {
    return InvalidArgument("segment regions are not aligned");
  }
  char* base = static_cast<char*>(base_address);
  RETURN_IF_ERROR(
      SpscRing<BatchMessage>::Attach(base + header->request_ring_offset,
                                     header->completion_ring_offset - header->request_ring_offset)
          .status());
  RETURN_IF_ERROR(SpscRing<CompletionMessage>::Attach(
                      base + header->completion_ring_offset,
                      header->topup_ring_offset - header->completion_ring_offset)
                      .status());
  RETURN_IF_ERROR(SpscRing<BatchMessage>::Attach(base + header->topup_ring_offset,
                                                 header->slots_offset - header->topup_ring_offset)
                      .status());
  return Status::Ok();
}

Status Segment::Remove(const std::string& name) {
  bip::shared_memory_object::remove(name.c_str());
  return Status::Ok();
}

std::vector<std::string> Segment::RemoveStale() {
  std::vector<std::string> removed;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return removed;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const size_t dot = name.find('.', sizeof(kPrefix) - 1);
    if (dot == std::string::npos) continue;
    const std::string pid_text = name.substr(sizeof(kPrefix) - 1, dot - (sizeof(kPrefix) - 1));
    char* end = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (pid_text.empty() || *end != '\0' || pid <= 0) continue;
    if (pid == getpid()) {
      // Ours, or an earlier incarnation's (names without one are of versions before them).
      const std::string mine = std::to_string(pid) + "." + Incarnation() + ".";
      if (name.compare(sizeof(kPrefix) - 1, mine.size(), mine) == 0) continue;
    } else if (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) {
      continue;  // still alive
    }
    bip::shared_memory_object::remove(name.c_str());
    removed.push_back(name);
  }
  closedir(dir);
  return removed;
}

Status Segment::Reserve(const uint8_t* at, uint64_t bytes) const {
  const auto* base = reinterpret_cast<const uint8_t*>(header_);
  const uint64_t size = region_->get_size();
  if (at < base || static_cast<uint64_t>(at - base) > size || bytes > size - (at - base)) {
    return InvalidArgument("Reserve outside segment '" + name_ + "'");
  }
  if (bytes == 0) return Status::Ok();
  return Back(fd_, at - base, bytes, name_);
}

Status Segment::BackInput(uint32_t slot, uint64_t bytes) {
  if (slot >= num_slots_) return InvalidArgument("no slot " + std::to_string(slot));
  return BackSlab(input_slab(slot), slot_input_bytes_, bytes, &input_backed_[slot]);
}

Status Segment::BackOutput(uint32_t slot, uint64_t bytes) {
  if (slot >= num_slots_) return InvalidArgument("no slot " + std::to_string(slot));
  return BackSlab(output_slab(slot), slot_output_bytes_, bytes, &output_backed_[slot]);
}

Status Segment::BackSlab(uint8_t* slab, uint64_t capacity, uint64_t bytes, uint64_t* backed) {
  bytes = std::min(bytes, capacity);
  if (bytes <= *backed) return Status::Ok();
  constexpr uint64_t kStep = 1 << 20;
  const uint64_t step = std::min(capacity, std::max(bytes, *backed + kStep));
  if (Reserve(slab + *backed, step - *backed).ok()) {
    *backed = step;
    return Status::Ok();
  }
  RETURN_IF_ERROR(Reserve(slab + *backed, bytes - *backed));  // no room for the step: just this
  *backed = bytes;
  return Status::Ok();
}

uint8_t* Segment::input_slab(uint32_t slot) const {
  auto* base = reinterpret_cast<uint8_t*>(header_);
  return base + slots_offset_ + slot * (slot_input_bytes_ + slot_output_bytes_);
}

uint8_t* Segment::output_slab(uint32_t slot) const { return input_slab(slot) + slot_input_bytes_; }

void Segment::SetState(RuntimeState state) {
  header_->state.store(static_cast<uint32_t>(state), std::memory_order_release);
  FutexWakeAll(&header_->state);
}

void Segment::Fail(const std::string& message) {
  const size_t n = std::min(message.size(), kErrorTextSize - 1);
  std::memcpy(header_->error, message.data(), n);
  header_->error[n] = '\0';
  SetState(RuntimeState::kFailed);
}

void Segment::SetInfo(const std::string& text) {
  const size_t n = std::min(text.size(), kErrorTextSize - 1);
  std::memcpy(header_->info, text.data(), n);
  header_->info[n] = '\0';
}

std::string Segment::InfoText() const {
  return std::string(header_->info, strnlen(header_->info, kErrorTextSize));
}

std::string Segment::ErrorText() const {
  return std::string(header_->error, strnlen(header_->error, kErrorTextSize));
}

}  // namespace packrat::shm
