// One generative instance: a packrat-runtime process in --generate mode (runtime/
// generation_loop.h), its segment, and the agent thread that collects its tokens.
//
// Sequences submitted here wait in a FIFO until a prompt slot of the segment is free; the
// prompt is copied in, the runtime takes it (kAccepted frees the slot) and decodes it in its
// batch with top-up batching; every token comes back as it is generated and is handed to the
// sequence's callback. A sequence ends exactly once: with its last token (OK), cancelled, or
// failed.
//
// Thread-safety: Submit/Cancel/load/Stop may be called from any thread. Callbacks run on the
// instance's completion thread (or on the caller's, for sequences that end before they were
// sent) and must not block.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/pool/hang_watch.h"
#include "agent/pool/process_launcher.h"
#include "common/status.h"
#include "shm/segment.h"
#include "common/mutex.h"

namespace packrat {

// One sequence to generate.
struct GenerateRequest {
  std::vector<int64_t> prompt;
  shm::GenerateParams params{};
  // Each token as it comes (`last` for the final one). Not called after the sequence ended.
  std::function<void(int32_t token, float prob, bool last)> on_token;
  // Once: OK after the last token, kCancelled, or the error.
  std::function<void(const Status&)> on_done;
};

struct DecodeInstanceOptions {
  std::string model_name;
  int index = 0;
  uint64_t generation = 1;
  std::string runtime_path;
  std::string model_path;
  int threads = 1;
  int slots = 1;  // decode slots: the plan's b, or max_batch for `instances: auto` (then
                  // set_slots_limit says how many are used)
  std::string refill = "half";       // half | step | static (runtime --refill)
  int64_t max_prompt_tokens = 1024;  // prompt slab size
  std::vector<int> cores;
  std::string cgroup_procs;
  std::chrono::seconds startup_timeout{300};
  // A runtime with sequences running that reports nothing (no step, no acceptance) for this
  // long is hung: it is killed and handled as dead. Zero: never.
  std::chrono::milliseconds slice_timeout{0};
  // Called once, on the completion thread, if the runtime dies while not being stopped (its
  // sequences have failed with kUnavailable by then).
  std::function<void(const std::string& why)> on_death;
  // Called on the completion thread after every decode step: the sequences it decoded and its
  // time (next-token choice included). Must not block. May be empty.
  std::function<void(int64_t sequences, std::chrono::nanoseconds took)> on_step;
};

class DecodeInstance {
 public:
  // Blocks until the runtime has loaded and warmed up the decoder. `launcher` is not owned.
  static StatusOr<std::unique_ptr<DecodeInstance>> Start(const DecodeInstanceOptions& options,
                                                         ProcessLauncher* launcher);
  ~DecodeInstance();  // Stop()s with a short drain

  // Queues a sequence; returns its id (for Cancel). A stopped or dead instance fails it at once.
  uint64_t Submit(std::shared_ptr<GenerateRequest> request);
  // As Submit, but a stopped or dead instance refuses the sequence (nullopt) without touching
  // it, so that the caller can give it to another instance (one it picked may be stopping).
  std::optional<uint64_t> TrySubmit(const std::shared_ptr<GenerateRequest>& request);
  // Ends sequence `id` (its on_done gets kCancelled) and frees its decode slot. No-op if it has
  // ended already.
  void Cancel(uint64_t id);
  // Sequences queued here or decoding.
  size_t load() const;
  // Lets sequences finish (up to `drain`), then stops the process and removes the segment;
  // whatever is left fails with kUnavailable. Idempotent.
  void Stop(std::chrono::milliseconds drain);

  // Decodes at most `n` sequences together from now on (1..options().slots; 0 = every slot):
  // the runtime's refill policy counts this many slots. Sequences beyond it wait in the
  // runtime; none running is evicted. No-op once stopped.
  void set_slots_limit(int n);

  pid_t pid() const { return pid_; }
  bool alive() const;
  // "kernel=fp32 layers=… heads=… max_len=… vocab=… slots=…" as the runtime reported it.
  const std::string& load_report() const { return load_report_; }
  int64_t max_len() const { return max_len_; }
  int64_t vocab() const { return vocab_; }
  const DecodeInstanceOptions& options() const { return options_; }

 private:
  DecodeInstance(DecodeInstanceOptions options, ProcessLauncher* launcher,
                 std::unique_ptr<shm::Segment> segment, pid_t pid);

  struct Entry {
    uint64_t id = 0;
    std::shared_ptr<GenerateRequest> request;
  };

  void CompletionLoop();
  void HandleCompletion(const shm::CompletionMessage& msg);
  // Copies queued prompts into free slots and sends them. Returns entries that could not be
  // sent, to be failed without the lock. Requires mu_.
  std::vector<std::pair<Entry, Status>> SendLocked() REQUIRES(mu_);
  void MarkDead(const std::string& why);
  // If the runtime counts as hung now (options.slice_timeout), SIGKILLs it and returns why;
  // otherwise returns empty. Signals under mu_, so never after Stop() took over the process.
  // Completion thread.
  std::string KillIfHung();
  bool IdleLocked() const REQUIRES(mu_) { return queued_.empty() && running_.empty(); }

  const DecodeInstanceOptions options_;
  ProcessLauncher* const launcher_;
  std::unique_ptr<shm::Segment> segment_;
  const pid_t pid_;
  std::string load_report_;
  int64_t max_len_ = 0;
  int64_t vocab_ = 0;

  mutable Mutex mu_;
  CondVar idle_cv_;  // signalled when nothing is queued or running
  std::deque<Entry> queued_ GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<GenerateRequest>> running_ GUARDED_BY(mu_);  // sent
  std::vector<bool> slot_busy_ GUARDED_BY(mu_);
  // Progress: anything the runtime reported, or a prompt handed to it while it had none
  // running.
  HangWatch hang_watch_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  bool accepting_ GUARDED_BY(mu_) = true;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::string dead_reason_ GUARDED_BY(mu_);
  std::thread completion_thread_;
};

}  // namespace packrat
