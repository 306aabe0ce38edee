// One instance's shared-memory segment (see layout.h), created by the agent and opened by the
// runtime process it launches.
//
// Ownership: the Segment that Create()d the object removes its name on destruction (or on
// Remove()); one that Open()ed it only unmaps. Segment names are "packrat.<agent pid>.
// <incarnation>.<tag>" so that a later agent can find and remove the segments of an agent that
// died (RemoveStale), also when it has the dead one's pid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "shm/layout.h"
#include "shm/spsc_ring.h"

namespace boost::interprocess {
class mapped_region;
}

namespace packrat::shm {

struct SegmentOptions {
  uint32_t num_slots = 2;          // batches in flight per instance
  uint32_t ring_capacity = 8;      // entries per ring (>= num_slots), a power of two
  uint64_t slot_input_bytes = 0;   // capacity of each input slab
  uint64_t slot_output_bytes = 0;  // capacity of each output slab
};

class Segment {
 public:
  // "packrat.<pid>.<incarnation>.<tag>"; `tag` may hold [A-Za-z0-9_.-] (other characters
  // become '_'). The incarnation tells this process's segments from those of an earlier one
  // with the same pid (a restarted container's agent is PID 1 again).
  static std::string MakeName(pid_t agent_pid, const std::string& tag,
                              const std::string& incarnation = Incarnation());
  // Eight hex digits drawn once per process.
  static const std::string& Incarnation();

  // Creates, sizes and initialises a new segment; fails if the name exists.
  static StatusOr<std::unique_ptr<Segment>> Create(const std::string& name,
                                                   const SegmentOptions& options);
  // Opens an existing segment and validates it (ValidateMapping).
  static StatusOr<std::unique_ptr<Segment>> Open(const std::string& name);
  // Checks that the `size` bytes at `base` (64-byte aligned) hold a segment this code can use:
  // magic, version, size, slot count, every region inside the mapping and both ring headers.
  // Reads only; never trusts a field before checking it (the fuzzed parser of the runtime).
  static Status ValidateMapping(void* base, size_t size);
  // Removes a segment name; OK if it does not exist.
  static Status Remove(const std::string& name);
  // Removes the segments of agents that are no longer running, and those of an earlier process
  // with this one's pid (another incarnation); returns the names removed.
  static std::vector<std::string> RemoveStale();

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::string& name() const { return name_; }
  SegmentHeader* header() const { return header_; }
  SpscRing<BatchMessage>& requests() { return requests_; }
  SpscRing<CompletionMessage>& completions() { return completions_; }
  // Agent -> runtime: answers to top-up queries (layered batching), one per query.
  SpscRing<BatchMessage>& topups() { return topups_; }

  // The geometry is read from the header once, when the object is made (after Open validated
  // it): the runtime can write the header, and slab addresses computed from fields it changed
  // later would reach outside the agent's mapping. (The runtime trusts the agent's header.)
  uint32_t num_slots() const { return num_slots_; }
  uint8_t* input_slab(uint32_t slot) const;
  uint8_t* output_slab(uint32_t slot) const;
  uint64_t input_capacity() const { return slot_input_bytes_; }
  uint64_t output_capacity() const { return slot_output_bytes_; }

  // Backs the `bytes` bytes at `at` (inside the mapping) with memory now. The segment is sparse:
  // a page is only allocated when first written, and a write that finds /dev/shm full is a
  // SIGBUS that ends the process. Reserve first, and a full /dev/shm (or memory limit) is this
  // kUnavailable instead. Cheap for pages already backed. Thread-safe.
  Status Reserve(const uint8_t* at, uint64_t bytes) const;
  // Reserve for the first `bytes` of slot `slot`'s input (output) slab, as its writer is about to
  // fill them. Remembers how far each slab is backed, so that only growth costs a call, and
  // grows in steps of at least 1 MiB where /dev/shm has them. Bytes beyond the slab are not
  // backed (the copy that would need them fails its own check). Not thread-safe for one slab:
  // its one writer (the agent for inputs, the runtime for outputs) calls it.
  Status BackInput(uint32_t slot, uint64_t bytes);
  Status BackOutput(uint32_t slot, uint64_t bytes);

  RuntimeState state() const {
    return static_cast<RuntimeState>(header_->state.load(std::memory_order_acquire));
  }
  // Publishes a new state and wakes everyone waiting for a state change.
  void SetState(RuntimeState state);
  // Records `message` and moves to kFailed (runtime side).
  void Fail(const std::string& message);
  std::string ErrorText() const;
  // The runtime's one-line load report (runtime side writes it before SetState(kReady)).
  void SetInfo(const std::string& text);
  std::string InfoText() const;

 private:
  Segment(std::string name, std::unique_ptr<boost::interprocess::mapped_region> region, int fd,
          bool owner, SpscRing<BatchMessage> requests, SpscRing<CompletionMessage> completions,
          SpscRing<BatchMessage> topups);
  // BackInput/BackOutput: `backed` is how far `slab` (`capacity` bytes) is backed.
  Status BackSlab(uint8_t* slab, uint64_t capacity, uint64_t bytes, uint64_t* backed);

  std::string name_;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
  int fd_;  // the shared-memory object, owned: for Reserve
  bool owner_;
  SegmentHeader* header_;
  uint32_t num_slots_;
  uint64_t slots_offset_;
  uint64_t slot_input_bytes_;
  uint64_t slot_output_bytes_;
  std::vector<uint64_t> input_backed_;   // by slot: bytes backed from the slab's start
  std::vector<uint64_t> output_backed_;  // by slot
  SpscRing<BatchMessage> requests_;
  SpscRing<CompletionMessage> completions_;
  SpscRing<BatchMessage> topups_;
};

}  // namespace packrat::shm
