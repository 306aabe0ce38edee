// A single-producer single-consumer ring of fixed-size trivially-copyable entries, living in
// shared memory and used by two processes.
//
// Invariants: 0 <= head - tail <= capacity; entries [tail, head) are full. Only the producer
// writes `head` and entry slots in [head, tail + capacity); only the consumer writes `tail`.
// Blocking calls spin briefly, then sleep on a futex word in the ring header, so an idle side
// burns no core. Every blocking call takes a timeout; Close() wakes all waiters of both sides,
// which then return kUnavailable, so a peer that is going away never leaves the other stuck.
//
// Thread-safety: at most one thread (or serialised threads) pushes and one pops at a time.
// The object itself is a cheap view (a pointer and the capacity) and may be copied.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>

#include "common/status.h"
#include "shm/futex.h"
#include "shm/layout.h"

namespace packrat::shm {

template <typename T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring entries must be plain data");

 public:
  // Bytes a ring of `capacity` entries occupies (header + entries), a multiple of kAlign.
  static constexpr size_t BytesFor(uint32_t capacity) {
    return sizeof(RingHeader) + AlignUp(sizeof(T) * capacity);
  }

  // Creates an empty ring in `memory` (at least BytesFor(capacity) bytes, kAlign-aligned).
  // Called once by the segment's creator before the peer attaches. capacity: a power of two.
  static SpscRing Initialize(void* memory, uint32_t capacity) {
    auto* header = new (memory) RingHeader();
    header->head.store(0, std::memory_order_relaxed);
    header->tail.store(0, std::memory_order_relaxed);
    header->data_seq.store(0, std::memory_order_relaxed);
    header->consumer_waiting.store(0, std::memory_order_relaxed);
    header->space_seq.store(0, std::memory_order_relaxed);
    header->producer_waiting.store(0, std::memory_order_relaxed);
    header->closed.store(0, std::memory_order_relaxed);
    header->capacity = capacity;
    header->entry_size = sizeof(T);
    return SpscRing(header, capacity);
  }

  // Attaches to a ring made by Initialize, checking that it holds T and fits in `bytes`.
  static StatusOr<SpscRing> Attach(void* memory, size_t bytes) {
    if (bytes < sizeof(RingHeader)) return InvalidArgument("ring region too small");
    auto* header = static_cast<RingHeader*>(memory);
    const uint32_t cap = header->capacity;
    if (header->entry_size != sizeof(T)) return InvalidArgument("ring entry size mismatch");
    if (cap == 0 || (cap & (cap - 1)) != 0) return InvalidArgument("ring capacity not 2^k");
    if (BytesFor(cap) > bytes) return InvalidArgument("ring does not fit its region");
    return SpscRing(header, cap);  // the capacity checked, not a second read
  }

  uint32_t capacity() const { return capacity_; }
  size_t size() const {
    return static_cast<size_t>(header_->head.load(std::memory_order_acquire) -
                               header_->tail.load(std::memory_order_acquire));
  }
  bool closed() const { return header_->closed.load(std::memory_order_acquire) != 0; }

  // Producer side. Returns false if the ring is full. Never blocks.
  bool TryPush(const T& entry) {
    const uint64_t head = header_->head.load(std::memory_order_relaxed);
    const uint64_t tail = header_->tail.load(std::memory_order_acquire);
    if (head - tail >= capacity_) return false;
    std::memcpy(&entries()[head & (capacity_ - 1)], &entry, sizeof(T));
    header_->head.store(head + 1, std::memory_order_release);
    Signal(&header_->data_seq, &header_->consumer_waiting);
    return true;
  }

  // Consumer side. Returns false if the ring is empty. Never blocks.
  bool TryPop(T* entry) {
    const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
    const uint64_t head = header_->head.load(std::memory_order_acquire);
    if (head == tail) return false;
    std::memcpy(entry, &entries()[tail & (capacity_ - 1)], sizeof(T));
    header_->tail.store(tail + 1, std::memory_order_release);
    Signal(&header_->space_seq, &header_->producer_waiting);
    return true;
  }

  // Blocks up to `timeout` for room, then pushes. kDeadlineExceeded on timeout, kUnavailable if
  // the ring was closed.
  Status Push(const T& entry, std::chrono::nanoseconds timeout) {
    return Wait([&] { return TryPush(entry); }, &header_->space_seq, &header_->producer_waiting,
                timeout);
  }

  // Blocks up to `timeout` for an entry, then pops it. Same errors as Push. Entries pushed
  // before Close() are still delivered.
  Status Pop(T* entry, std::chrono::nanoseconds timeout) {
    return Wait([&] { return TryPop(entry); }, &header_->data_seq, &header_->consumer_waiting,
                timeout);
  }

  // Marks the ring closed and wakes every waiter on both sides. Either process may call it.
  void Close() {
    header_->closed.store(1, std::memory_order_release);
    header_->data_seq.fetch_add(1, std::memory_order_seq_cst);
    header_->space_seq.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&header_->data_seq);
    FutexWakeAll(&header_->space_seq);
  }

  // How long a blocking call polls before sleeping on the futex. A futex wake-up costs tens of
  // microseconds on a VM, more than a short batch of a small model; tests set 0 to exercise
  // the sleep path.
  void set_spin(std::chrono::nanoseconds spin) { spin_ = spin; }
  void set_spin_iterations(int n) { spin_ = n == 0 ? std::chrono::nanoseconds(0) : spin_; }

 private:
  // The capacity is read once: the peer process can write the header, and indices masked with
  // a capacity it changed later would reach past the ring.
  SpscRing(RingHeader* header, uint32_t capacity) : header_(header), capacity_(capacity) {}

  T* entries() const {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(header_) + sizeof(RingHeader));
  }

  // After publishing: bump the sequence word and wake the other side if it announced a sleep.
  static void Signal(std::atomic<uint32_t>* seq, std::atomic<uint32_t>* waiting) {
    seq->fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiting->load(std::memory_order_seq_cst) != 0) FutexWake(seq);
  }

  template <typename TryFn>
  Status Wait(TryFn try_once, std::atomic<uint32_t>* seq, std::atomic<uint32_t>* waiting,
              std::chrono::nanoseconds timeout) {
    const auto start = std::chrono::steady_clock::now();
    const auto spin_until = start + std::min(spin_, timeout);
    for (int i = 0; spin_.count() > 0; ++i) {
      if (try_once()) return Status::Ok();
      if (closed()) break;
      __builtin_ia32_pause();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() >= spin_until) break;
    }
    const auto deadline = start + timeout;
    while (true) {
      if (try_once()) return Status::Ok();
      // `closed` is read after `observed`: Close() sets it before bumping the sequence words,
      // so a Close() that this check misses changes `seq` and FutexWait returns at once. Read
      // before `observed`, a Close() in between would be missed by both and its wake-up lost.
      const uint32_t observed = seq->load(std::memory_order_seq_cst);
      if (closed()) return try_once() ? Status::Ok() : Unavailable("ring closed");
      waiting->store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (try_once()) {
        waiting->store(0, std::memory_order_relaxed);
        return Status::Ok();
      }
      const auto remaining = deadline - std::chrono::steady_clock::now();
      if (remaining <= std::chrono::nanoseconds::zero()) {
        waiting->store(0, std::memory_order_relaxed);
        return DeadlineExceeded("ring wait timed out");
      }
      FutexWait(seq, observed, remaining);
      waiting->store(0, std::memory_order_relaxed);
    }
  }

  RingHeader* header_;
  uint32_t capacity_;
  std::chrono::nanoseconds spin_{std::chrono::microseconds(5)};
};

}  // namespace packrat::shm
