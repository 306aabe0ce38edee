// One thin model instance: a packrat-runtime process, its shared-memory segment, and the agent
// thread that collects its completions.
//
// Life cycle: Start() creates the segment, launches the process and blocks until the runtime
// has loaded and warmed up the model (or failed). Enqueue()d slices wait in a FIFO for one of
// the segment's slots; a slot is filled (the one input copy), pushed to the request ring, and
// freed when its completion arrives. Stop() drains in-flight work, closes the rings, reaps the
// process and removes the segment. If the process dies, every queued and running slice fails
// with kUnavailable and later slices fail at once. A process that hangs with slices running
// (options.slice_timeout) is killed, and then handled as one that died.
//
// Thread-safety: Enqueue/load/Stop may be called from any thread. Completion callbacks
// (request delivery, slice on_done) run on the instance's completion thread.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/batching/instance_executor.h"
#include "agent/config/config.h"
#include "agent/config/kernel_settings.h"
#include "agent/kserve/tensor.h"
#include "agent/pool/hang_watch.h"
#include "agent/pool/process_launcher.h"
#include "common/mutex.h"
#include "shm/segment.h"

namespace packrat {

// What the runtime reported for one slice it computed.
struct SliceTiming {
  int64_t rows = 0;                     // rows computed, joined rows included
  int64_t requests = 0;                 // the requests (or parts of requests) those rows came from
  std::chrono::nanoseconds input{0};    // the agent's copy of the inputs into the slab
  std::chrono::nanoseconds compute{0};  // as the runtime timed it
  std::chrono::nanoseconds output{0};   // the agent's copy of the outputs to the requests
  std::vector<std::chrono::nanoseconds> stages;  // staged models: time in each stage
};

struct RuntimeInstanceOptions {
  std::string model_name;
  int index = 0;             // position in the model's instance list, for names and logs
  uint64_t generation = 1;   // the instance set it belongs to, for names and logs
  std::string runtime_path;  // packrat-runtime
  std::string model_path;
  int threads = 1;
  int64_t batch = 1;  // b: the slice size it is warmed up at
  // The most rows one slice may carry (the slabs hold that many); at least `batch`. Larger
  // lets a later plan keep this instance at a larger b (the slabs are sparse: rows never
  // written cost no memory).
  int64_t capacity = 0;
  std::vector<int> cores;    // pinned cores; empty = inherit the agent's affinity
  std::string cgroup_procs;  // the runtime joins this cgroup before exec; empty = none
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int warmup_iterations = 3;
  KernelSettings kernel;    // resolved: how the runtime optimises the model
  AccuracyConfig accuracy;  // the guard against the FP32 original
  std::chrono::seconds startup_timeout{300};
  // A runtime that has slices to compute but reports nothing (no completion, no top-up query)
  // for this long is hung: it is killed and handled as dead (on_death). Zero: never.
  std::chrono::milliseconds slice_timeout{0};
  uint32_t slots = 2;      // slices in flight: one computing while the next is copied in
  int idle_spin_us = 100;  // the runtime polls this long for the next slice before sleeping
  // Start at idle priority for at most this long (0: never); common/idle_priority.h.
  double idle_start_s = 0;
  // Warm up only while at idle priority (else start cold): for a start on busy CPUs.
  bool warmup_while_idle = false;
  // Slab bytes per slot of each tensor whose row size varies (BatchingConfig).
  uint64_t variable_slab_bytes = 16ull << 20;
  // An emulated runtime (`emulate.enabled`; runtime_path is then packrat-emulated-runtime):
  // its profile, load time, neighbour slowdown and node state go on its command line with the
  // outputs' row shapes. On a virtual node (`emulate.virtual_node`) `cores` are virtual CPU
  // ids: passed to the runtime, never pinned.
  EmulateConfig emulate;
  // Called on the completion thread for every slice the runtime computed successfully, once
  // its outputs are copied out, before its requests are answered. Must not block. May be
  // empty.
  std::function<void(const SliceTiming&)> on_slice_computed;
  // Layered batching: for a staged model, the runtime asks at each stage boundary of a running
  // slice for more rows, and this answers (on the completion thread). Empty: it never asks.
  TopUpSource top_up;
  // Called once, on the completion thread, if the runtime dies while the instance is not being
  // stopped, with the slices it had queued or running; the callee must deliver or fail every
  // one of them (e.g. retry them on another instance). Empty: they fail with kUnavailable.
  std::function<void(std::vector<WorkSlice> orphans, const std::string& why)> on_death;
};

class RuntimeInstance : public InstanceExecutor {
 public:
  // Blocks until the runtime is ready. Errors carry the runtime's own reason (e.g. the model
  // failed to load). `launcher` is not owned and must outlive the instance.
  static StatusOr<std::unique_ptr<RuntimeInstance>> Start(const RuntimeInstanceOptions& options,
                                                          ProcessLauncher* launcher);
  ~RuntimeInstance() override;  // Stop()s with a short drain

  void Enqueue(WorkSlice slice) override;
  int64_t batch_size() const override { return std::max(options_.batch, options_.capacity); }
  uint64_t input_capacity() const override;
  size_t load() const override;

  // Lets in-flight and queued slices finish (up to `drain`), then stops the process and removes
  // the segment. Slices enqueued afterwards fail with kUnavailable. Idempotent.
  void Stop(std::chrono::milliseconds drain);

  pid_t pid() const { return pid_; }
  // Layered batching: tells the runtime how many rows wait in the model's queue (it asks for
  // top-ups only while some do). Lock-free; any thread.
  void SetQueuedRowsHint(int64_t rows);
  // What the runtime reported at start: its effective kernel settings and the accuracy guard's
  // figures, "kernel=bf16+cl max_rel_error=0.004 top1_agreement=1 fallback=0" (see
  // runtime_main.cc); empty from runtimes that report nothing.
  const std::string& load_report() const { return load_report_; }
  // How it started beside a serving set: "idle", "idle-until-limit", "idle-until-starved" or
  // "normal" (RuntimeProcess::start_priority; an emulated runtime's from its load report);
  // "" where no idle start was asked for.
  const std::string& start_priority() const { return start_priority_; }
  const RuntimeInstanceOptions& options() const { return options_; }
  bool alive() const override;

 private:
  RuntimeInstance(RuntimeInstanceOptions options, ProcessLauncher* launcher,
                  std::unique_ptr<shm::Segment> segment, pid_t pid);

  void CompletionLoop();
  // Moves queued slices into free slots. Returns slices that failed to start (to be failed by
  // the caller without the lock). Requires mu_.
  std::vector<std::pair<WorkSlice, Status>> FillSlotsLocked() REQUIRES(mu_);
  void HandleCompletion(const shm::CompletionMessage& msg);
  // Answers a top-up query: asks options_.top_up, copies the granted rows into the slot's
  // input slab after the slice's own, and adds them to the running slice.
  void HandleTopUpQuery(const shm::CompletionMessage& msg);
  // The runtime is gone: fail everything, refuse new work.
  void MarkDead(const std::string& why);
  // If the runtime counts as hung now (options.slice_timeout), SIGKILLs it and returns why;
  // otherwise returns empty. Signals under mu_, so never after Stop() took over the process.
  // Completion thread.
  std::string KillIfHung();
  bool IdleLocked() const REQUIRES(mu_);

  const RuntimeInstanceOptions options_;
  ProcessLauncher* const launcher_;
  std::unique_ptr<shm::Segment> segment_;
  const pid_t pid_;
  std::string load_report_;  // set once at start
  std::string start_priority_;

  mutable Mutex mu_;
  CondVar idle_cv_;  // signalled when nothing is queued or running
  std::deque<WorkSlice> queued_ GUARDED_BY(mu_);
  std::vector<std::optional<WorkSlice>> running_ GUARDED_BY(mu_);  // by slot
  // By slot: true from filling the input slab until the outputs were copied out.
  std::vector<bool> slot_busy_ GUARDED_BY(mu_);
  // By slot: bytes of the input slab the running slice's inputs use.
  std::vector<uint64_t> slot_used_ GUARDED_BY(mu_);
  std::vector<std::chrono::nanoseconds> slot_input_ GUARDED_BY(mu_);  // its inputs' copy
  // Progress: a completion or top-up query arrived, or a slice was handed to the runtime while
  // it had none.
  HangWatch hang_watch_ GUARDED_BY(mu_);
  bool accepting_ GUARDED_BY(mu_) = true;
  std::string dead_reason_ GUARDED_BY(mu_);  // non-empty once dead
  bool stopped_ GUARDED_BY(mu_) = false;
  uint64_t next_batch_id_ GUARDED_BY(mu_) = 1;
  std::thread completion_thread_;
};

}  // namespace packrat
