#include "shm/virtual_cpus.h"

#include <signal.h>

#include <algorithm>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>

#include "shm/futex.h"
#include "shm/layout.h"

namespace packrat::shm {
namespace bip = boost::interprocess;

namespace {

constexpr uint64_t CountsOffset() { return AlignUp(sizeof(VirtualCpusHeader)); }

uint64_t HoldersOffset(uint32_t num_cpus) {
  return AlignUp(CountsOffset() + uint64_t{num_cpus} * sizeof(std::atomic<uint32_t>));
}

uint64_t SegmentBytes(uint32_t num_cpus, uint32_t max_holders) {
  return HoldersOffset(num_cpus) + uint64_t{max_holders} * sizeof(HolderSlot);
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

VirtualCpus::VirtualCpus(std::string name, std::unique_ptr<bip::mapped_region> region, bool owner)
    : name_(std::move(name)), region_(std::move(region)), owner_(owner) {
  char* base = static_cast<char*>(region_->get_address());
  header_ = reinterpret_cast<VirtualCpusHeader*>(base);
  num_cpus_ = static_cast<int>(header_->num_cpus);
  max_holders_ = static_cast<int>(header_->max_holders);
  busy_ = reinterpret_cast<std::atomic<uint32_t>*>(base + CountsOffset());
  holders_ = reinterpret_cast<HolderSlot*>(base + HoldersOffset(header_->num_cpus));
}

VirtualCpus::~VirtualCpus() {
  region_.reset();
  if (owner_) bip::shared_memory_object::remove(name_.c_str());
}

StatusOr<std::unique_ptr<VirtualCpus>> VirtualCpus::Create(const std::string& name, int num_cpus,
                                                           int max_holders) {
  if (num_cpus < 1 || num_cpus > kMaxVirtualCpus) {
    return InvalidArgument("a virtual node has 1 to " + std::to_string(kMaxVirtualCpus) +
                           " CPUs, not " + std::to_string(num_cpus));
  }
  if (max_holders <= 0) max_holders = std::max(64, 4 * num_cpus);
  const uint64_t total =
      SegmentBytes(static_cast<uint32_t>(num_cpus), static_cast<uint32_t>(max_holders));
  bool created = false;
  try {
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write);
    created = true;
    shm.truncate(static_cast<bip::offset_t>(total));
    auto region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
    char* base = static_cast<char*>(region->get_address());
    auto* header = new (base) VirtualCpusHeader();
    header->magic = kVirtualCpusMagic;
    header->version = kVirtualCpusVersion;
    header->num_cpus = static_cast<uint32_t>(num_cpus);
    header->max_holders = static_cast<uint32_t>(max_holders);
    header->reserved = 0;
    header->segment_size = total;
    header->generation.store(0, std::memory_order_relaxed);
    header->busy_cpus.store(0, std::memory_order_relaxed);
    header->changed_ns.store(0, std::memory_order_relaxed);
    auto* counts = reinterpret_cast<std::atomic<uint32_t>*>(base + CountsOffset());
    for (int c = 0; c < num_cpus; ++c) new (&counts[c]) std::atomic<uint32_t>(0);
    auto* holders = reinterpret_cast<HolderSlot*>(base + HoldersOffset(header->num_cpus));
    for (int h = 0; h < max_holders; ++h) {
      auto* s = new (&holders[h]) HolderSlot();
      s->pid.store(0, std::memory_order_relaxed);
      s->marked.store(0, std::memory_order_relaxed);
      s->doorbell.store(0, std::memory_order_relaxed);
      s->watch_all.store(0, std::memory_order_relaxed);
      s->rung_ns.store(0, std::memory_order_relaxed);
      std::fill(std::begin(s->mask), std::end(s->mask), 0);
    }
    std::atomic_thread_fence(std::memory_order_release);
    return std::unique_ptr<VirtualCpus>(new VirtualCpus(name, std::move(region), true));
  } catch (const bip::interprocess_exception& e) {
    if (created) bip::shared_memory_object::remove(name.c_str());
    return Internal("cannot create the virtual node's shared memory '" + name + "': " + e.what());
  }
}

StatusOr<std::unique_ptr<VirtualCpus>> VirtualCpus::Open(const std::string& name) {
  std::unique_ptr<bip::mapped_region> region;
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    region = std::make_unique<bip::mapped_region>(shm, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    return NotFound("cannot open the virtual node's shared memory '" + name + "': " + e.what());
  }
  const size_t size = region->get_size();
  if (size < sizeof(VirtualCpusHeader)) return InvalidArgument("virtual node: segment too small");
  const auto* header = static_cast<const VirtualCpusHeader*>(region->get_address());
  if (header->magic != kVirtualCpusMagic) return InvalidArgument("virtual node: bad magic");
  if (header->version != kVirtualCpusVersion) {
    return InvalidArgument("virtual node: layout version " + std::to_string(header->version) +
                           ", this runtime speaks " + std::to_string(kVirtualCpusVersion));
  }
  if (header->num_cpus < 1 || header->num_cpus > static_cast<uint32_t>(kMaxVirtualCpus) ||
      header->max_holders < 1 || header->max_holders > (1u << 20) || header->segment_size != size ||
      SegmentBytes(header->num_cpus, header->max_holders) != size) {
    return InvalidArgument("virtual node: header does not match the segment");
  }
  return std::unique_ptr<VirtualCpus>(new VirtualCpus(name, std::move(region), false));
}

HolderSlot* VirtualCpus::slot(int holder) const {
  return holder >= 0 && holder < max_holders_ ? &holders_[holder] : nullptr;
}

StatusOr<int> VirtualCpus::Claim(pid_t pid) {
  if (pid <= 0) return InvalidArgument("virtual node: bad pid " + std::to_string(pid));
  ReapDead();
  for (int h = 0; h < max_holders_; ++h) {
    int32_t expected = 0;
    if (holders_[h].pid.compare_exchange_strong(expected, static_cast<int32_t>(pid),
                                                std::memory_order_acq_rel)) {
      return h;
    }
  }
  return ResourceExhausted("virtual node: all " + std::to_string(max_holders_) +
                           " runtime slots are held");
}

void VirtualCpus::Release(int holder) {
  HolderSlot* s = slot(holder);
  if (s == nullptr) return;
  Unmark(holder);
  s->watch_all.store(0, std::memory_order_release);
  s->pid.store(0, std::memory_order_release);
}

void VirtualCpus::WatchAll(int holder, bool all) {
  if (HolderSlot* s = slot(holder)) s->watch_all.store(all ? 1 : 0, std::memory_order_release);
}

Status VirtualCpus::Mark(int holder, const std::vector<int>& cpus) {
  HolderSlot* s = slot(holder);
  if (s == nullptr) return InvalidArgument("virtual node: no holder " + std::to_string(holder));
  if (s->marked.load(std::memory_order_acquire) != 0) {
    return FailedPrecondition("virtual node: holder " + std::to_string(holder) +
                              " has CPUs marked already");
  }
  std::fill(std::begin(s->mask), std::end(s->mask), 0);
  for (int c : cpus) {
    if (c < 0 || c >= num_cpus_) {
      return InvalidArgument("CPU " + std::to_string(c) + " is not on the virtual node (0-" +
                             std::to_string(num_cpus_ - 1) + ")");
    }
    s->mask[c / 64] |= uint64_t{1} << (c % 64);
  }
  s->marked.store(1);  // seq_cst: against Publish's load of it (a Dekker pair)
  for (int c = 0; c < num_cpus_; ++c) {
    if ((s->mask[c / 64] >> (c % 64) & 1) == 0) continue;
    if (busy_[c].fetch_add(1, std::memory_order_acq_rel) == 0) {
      header_->busy_cpus.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  Publish(s, s->mask);
  return Status::Ok();
}

void VirtualCpus::Unmark(int holder) {
  HolderSlot* s = slot(holder);
  if (s == nullptr || s->marked.load(std::memory_order_acquire) == 0) return;
  Uncount(s);
  Publish(s, s->mask);
}

void VirtualCpus::Uncount(HolderSlot* s) {
  for (int c = 0; c < num_cpus_; ++c) {
    if ((s->mask[c / 64] >> (c % 64) & 1) == 0) continue;
    uint32_t n = busy_[c].load(std::memory_order_acquire);
    while (n > 0 && !busy_[c].compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
    }
    if (n == 1) {
      uint32_t b = header_->busy_cpus.load(std::memory_order_acquire);
      while (b > 0 &&
             !header_->busy_cpus.compare_exchange_weak(b, b - 1, std::memory_order_acq_rel)) {
      }
    }
  }
  s->marked.store(0, std::memory_order_release);
}

int VirtualCpus::ReapDead() {
  int reaped = 0;
  for (int h = 0; h < max_holders_; ++h) {
    HolderSlot* s = &holders_[h];
    int32_t pid = s->pid.load(std::memory_order_acquire);
    if (pid <= 0 || !ProcessGone(pid)) continue;
    if (!s->pid.compare_exchange_strong(pid, -1, std::memory_order_acq_rel)) continue;
    if (s->marked.load(std::memory_order_acquire) != 0) {
      Uncount(s);
      Publish(s, s->mask);
    }
    s->watch_all.store(0, std::memory_order_release);
    s->pid.store(0, std::memory_order_release);
    ++reaped;
  }
  return reaped;
}

uint32_t VirtualCpus::busy(int cpu) const {
  if (cpu < 0 || cpu >= num_cpus_) return 0;
  return busy_[cpu].load(std::memory_order_acquire);
}

uint32_t VirtualCpus::MaxBusy(const std::vector<int>& cpus) const {
  uint32_t most = 0;
  for (int c : cpus) most = std::max(most, busy(c));
  return most;
}

SteadyTime VirtualCpus::changed_at() const {
  return SteadyTime(std::chrono::nanoseconds(header_->changed_ns.load(std::memory_order_acquire)));
}

void VirtualCpus::Publish(const HolderSlot* by, const uint64_t* changed) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  header_->changed_ns.store(now, std::memory_order_release);
  header_->generation.fetch_add(1, std::memory_order_acq_rel);
  FutexWakeAll(&header_->generation);
  constexpr int kWords = kMaxVirtualCpus / 64;
  const int words = (num_cpus_ + 63) / 64;
  for (int h = 0; h < max_holders_; ++h) {
    HolderSlot* s = &holders_[h];
    if (s == by || s->marked.load() == 0) continue;  // seq_cst, as Mark's store
    bool concerned = s->watch_all.load(std::memory_order_acquire) != 0;
    for (int w = 0; !concerned && w < words && w < kWords; ++w) {
      concerned = (s->mask[w] & changed[w]) != 0;
    }
    if (!concerned) continue;
    s->rung_ns.store(now, std::memory_order_release);
    s->doorbell.fetch_add(1, std::memory_order_acq_rel);
    FutexWake(&s->doorbell, 1);
  }
}

void VirtualCpus::WaitForChange(uint32_t seen, std::chrono::nanoseconds timeout) const {
  if (generation() != seen) return;
  FutexWait(&header_->generation, seen, timeout);
}

uint32_t VirtualCpus::doorbell(int holder) const {
  const HolderSlot* s = slot(holder);
  return s ? s->doorbell.load(std::memory_order_acquire) : 0;
}

SteadyTime VirtualCpus::rung_at(int holder) const {
  const HolderSlot* s = slot(holder);
  return SteadyTime(std::chrono::nanoseconds(s ? s->rung_ns.load(std::memory_order_acquire) : 0));
}

void VirtualCpus::WaitForDoorbell(int holder, uint32_t seen,
                                  std::chrono::nanoseconds timeout) const {
  HolderSlot* s = slot(holder);
  if (s == nullptr || s->doorbell.load(std::memory_order_acquire) != seen) return;
  FutexWait(&s->doorbell, seen, timeout);
}

}  // namespace packrat::shm
