#include "agent/pool/runtime_instance.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "agent/batching/slice_io.h"
#include "agent/pool/runtime_process.h"
#include "common/idle_priority.h"
#include "common/load_report.h"
#include "common/logging.h"

namespace packrat {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(200);

static_assert(kSlabAlign == shm::kAlign, "slice_io lays tensors out as the runtime does");

// The end of the last of `inputs` in `slab`, 64-byte aligned.
uint64_t UsedBytes(const std::vector<TensorView>& inputs, const uint8_t* slab) {
  uint64_t end = 0;
  for (const TensorView& t : inputs) {
    end = std::max<uint64_t>(end, static_cast<uint64_t>(t.data - slab) + t.byte_size);
  }
  return shm::AlignUp(end);
}

void Describe(const std::vector<TensorView>& inputs, const uint8_t* slab, shm::BatchMessage* msg) {
  msg->num_tensors = static_cast<uint32_t>(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    shm::TensorDesc& d = msg->tensors[i];
    d.datatype = static_cast<uint8_t>(inputs[i].datatype);
    d.ndim = static_cast<uint8_t>(inputs[i].shape.size());
    for (size_t k = 0; k < inputs[i].shape.size(); ++k) d.shape[k] = inputs[i].shape[k];
    d.offset = static_cast<uint64_t>(inputs[i].data - slab);
    d.byte_size = inputs[i].byte_size;
  }
}

std::string JoinInts(const std::vector<int64_t>& v, size_t from) {
  std::string out;
  for (size_t i = from; i < v.size(); ++i) {
    if (i > from) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

}  // namespace

RuntimeInstance::RuntimeInstance(RuntimeInstanceOptions options, ProcessLauncher* launcher,
                                 std::unique_ptr<shm::Segment> segment, pid_t pid)
    : options_(std::move(options)),
      launcher_(launcher),
      segment_(std::move(segment)),
      pid_(pid),
      running_(segment_->num_slots()),
      slot_busy_(segment_->num_slots(), false),
      slot_used_(segment_->num_slots(), 0),
      slot_input_(segment_->num_slots()),
      hang_watch_(options_.slice_timeout, options_.startup_timeout) {
  completion_thread_ = std::thread([this] { CompletionLoop(); });
}

StatusOr<std::unique_ptr<RuntimeInstance>> RuntimeInstance::Start(
    const RuntimeInstanceOptions& options, ProcessLauncher* launcher) {
  RuntimeProcessOptions p;
  p.label = options.model_name + "/g" + std::to_string(options.generation) + "." +
            std::to_string(options.index);
  p.segment_tag = options.model_name + "." + std::to_string(options.index);
  p.segment.num_slots = options.slots;
  p.segment.ring_capacity = 8;
  while (p.segment.ring_capacity < options.slots) p.segment.ring_capacity *= 2;
  const int64_t capacity = std::max(options.batch, options.capacity);
  p.segment.slot_input_bytes = SlabBytes(options.inputs, capacity, options.variable_slab_bytes);
  p.segment.slot_output_bytes = SlabBytes(options.outputs, capacity, options.variable_slab_bytes);
  p.startup_timeout = options.startup_timeout;

  LaunchSpec& spec = p.spec;
  spec.path = options.runtime_path;
  if (!options.emulate.virtual_node) spec.cores = options.cores;
  spec.cgroup_procs = options.cgroup_procs;
  // A real runtime starting at idle priority does from its exec on (an emulated one emulates
  // it, at normal priority: it computes nothing).
  static const bool may_leave_idle = MayLeaveIdlePriority();
  spec.idle_priority = options.idle_start_s > 0 && !options.emulate.enabled && may_leave_idle;
  p.idle_limit = std::chrono::milliseconds(static_cast<int64_t>(options.idle_start_s * 1000));
  auto add = [&spec](const std::string& flag, const std::string& value) {
    spec.args.push_back(flag);
    spec.args.push_back(value);
  };
  if (!options.model_path.empty()) add("--model", options.model_path);
  add("--threads", std::to_string(options.threads));
  add("--agent-pid", std::to_string(getpid()));
  add("--name", p.label);
  if (!options.cores.empty()) {
    std::vector<int64_t> cores(options.cores.begin(), options.cores.end());
    add("--cores", JoinInts(cores, 0));
  }
  for (const TensorSpec& in : options.inputs) {
    add("--input", std::string(DataTypeName(in.datatype)) + ":" + JoinInts(in.shape, 1));
  }
  for (const TensorSpec& out : options.outputs) {
    add("--output-type", std::string(DataTypeName(out.datatype)));
  }
  // Warm up at the slice sizes this instance will see: its full batch and a single row.
  add("--warmup-batch", std::to_string(options.batch));
  if (options.batch != 1) add("--warmup-batch", "1");
  add("--warmup-iterations", std::to_string(options.warmup_iterations));
  add("--idle-spin-us", std::to_string(options.idle_spin_us));
  if (options.idle_start_s > 0) add("--idle-start-s", std::to_string(options.idle_start_s));
  if (options.warmup_while_idle) add("--warmup", "while-idle");
  if (options.kernel.precision == Precision::kBf16) add("--precision", "bf16");
  if (options.kernel.memory_format == MemoryFormat::kChannelsLast) {
    add("--memory-format", "channels_last");
  }
  if (options.kernel.freeze) spec.args.push_back("--freeze");
  if (!options.kernel.is_default() && options.accuracy.samples > 0) {
    add("--accuracy-samples", std::to_string(options.accuracy.samples));
    add("--accuracy-max-rel-error", std::to_string(options.accuracy.max_rel_error));
    add("--accuracy-min-top1", std::to_string(options.accuracy.min_top1_agreement));
    if (options.accuracy.strict) spec.args.push_back("--accuracy-strict");
  }

  if (options.emulate.enabled) {
    add("--emulate",
        options.emulate.truth.empty() ? options.emulate.profile : options.emulate.truth);
    if (options.emulate.profile_error > 0) {
      add("--profile-error", std::to_string(options.emulate.profile_error));
    }
    if (options.emulate.jitter_cv > 0)
      add("--jitter-cv", std::to_string(options.emulate.jitter_cv));
    add("--seed", std::to_string(options.emulate.seed));
    add("--load-s", std::to_string(options.emulate.load_s));
    add("--neighbour-slowdown", std::to_string(options.emulate.neighbour_slowdown));
    if (!options.emulate.node_state.empty()) add("--node", options.emulate.node_state);
    for (const TensorSpec& out : options.outputs) {
      add("--output", std::string(DataTypeName(out.datatype)) + ":" + JoinInts(out.shape, 1));
    }
  }

  ASSIGN_OR_RETURN(RuntimeProcess process, StartRuntimeProcess(p, launcher));
  PACKRAT_LOG(INFO) << "instance " << p.label << " ready: pid " << process.pid << ", "
                    << options.threads << " thread(s), batch " << options.batch << ", segment "
                    << process.segment->name();
  auto instance = std::unique_ptr<RuntimeInstance>(
      new RuntimeInstance(options, launcher, std::move(process.segment), process.pid));
  instance->load_report_ = std::move(process.load_report);
  instance->start_priority_ = std::move(process.start_priority);
  if (options.idle_start_s > 0 && instance->start_priority_.empty()) {
    const LoadReport report = LoadReport::Parse(instance->load_report_);  // owns what Get views
    const std::optional<std::string_view> emulated = report.Get("start_priority");
    instance->start_priority_ = emulated ? std::string(*emulated) : "normal";
  }
  if (!instance->load_report_.empty()) {
    PACKRAT_LOG(INFO) << "instance " << p.label << ": " << instance->load_report_;
  }
  return instance;
}

RuntimeInstance::~RuntimeInstance() { Stop(std::chrono::seconds(5)); }

void RuntimeInstance::SetQueuedRowsHint(int64_t rows) {
  segment_->header()->queued_rows_hint.store(
      static_cast<uint32_t>(std::clamp<int64_t>(rows, 0, UINT32_MAX)), std::memory_order_release);
}

uint64_t RuntimeInstance::input_capacity() const { return segment_->input_capacity(); }

size_t RuntimeInstance::load() const {
  MutexLock lock(&mu_);
  return queued_.size() + std::count(slot_busy_.begin(), slot_busy_.end(), true);
}

bool RuntimeInstance::alive() const {
  MutexLock lock(&mu_);
  return dead_reason_.empty() && !stopped_;
}

void RuntimeInstance::Enqueue(WorkSlice slice) {
  std::vector<std::pair<WorkSlice, Status>> failed;
  {
    MutexLock lock(&mu_);
    if (!accepting_) {
      failed.emplace_back(
          std::move(slice),
          Unavailable(dead_reason_.empty() ? "instance is stopping" : dead_reason_));
    } else {
      queued_.push_back(std::move(slice));
      failed = FillSlotsLocked();
    }
  }
  for (auto& [s, status] : failed) {
    FailSlice(s, status);
    if (s.on_done) s.on_done();
  }
}

std::vector<std::pair<WorkSlice, Status>> RuntimeInstance::FillSlotsLocked() {
  std::vector<std::pair<WorkSlice, Status>> failed;
  std::vector<TensorView> inputs;
  for (uint32_t slot = 0; slot < slot_busy_.size() && !queued_.empty(); ++slot) {
    if (slot_busy_[slot]) continue;
    WorkSlice slice = std::move(queued_.front());
    queued_.pop_front();
    uint8_t* slab = segment_->input_slab(slot);
    const auto copy_start = std::chrono::steady_clock::now();
    // Backed before written: a write into a full /dev/shm would be a SIGBUS. Under mu_, the
    // input slabs' one writer.
    Status s = segment_->BackInput(slot, SliceInputBytes(slice));
    if (!s.ok() && slice.ranges.size() > 1) {
      // Shared memory cannot take the whole slice: its requests go on one by one, so that only
      // those too large for what is left fail.
      PACKRAT_LOG(WARNING) << options_.model_name << "/" << options_.index << ": a slice of "
                           << slice.rows << " row(s) does not fit: " << s.message() << "; its "
                           << slice.ranges.size() << " requests go on one by one";
      std::vector<WorkSlice> parts = SplitByRange(std::move(slice));
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) queued_.push_front(std::move(*it));
      --slot;
      continue;
    }
    if (s.ok()) s = GatherInputs(slice, slab, segment_->input_capacity(), &inputs);
    if (s.ok() && inputs.size() > static_cast<size_t>(shm::kMaxTensors)) {
      s = InvalidArgument("too many inputs");
    }
    if (!s.ok()) {
      failed.emplace_back(std::move(slice), s);
      --slot;  // try the next queued slice in the same slot
      continue;
    }
    shm::BatchMessage msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.batch_id = next_batch_id_++;
    msg.slot = slot;
    msg.rows = slice.rows;
    msg.flags = options_.top_up ? shm::kBatchAllowTopUp : 0;
    Describe(inputs, slab, &msg);
    // The ring holds at least one entry per slot, so a push for a free slot always fits.
    if (!segment_->requests().TryPush(msg)) {
      failed.emplace_back(std::move(slice), Internal("request ring unexpectedly full"));
      continue;
    }
    if (std::none_of(running_.begin(), running_.end(),
                     [](const auto& r) { return r.has_value(); })) {
      hang_watch_.Started(std::chrono::steady_clock::now());
    }
    running_[slot] = std::move(slice);
    slot_busy_[slot] = true;
    slot_used_[slot] = UsedBytes(inputs, slab);
    slot_input_[slot] = std::chrono::steady_clock::now() - copy_start;
  }
  return failed;
}

bool RuntimeInstance::IdleLocked() const {
  return queued_.empty() &&
         std::none_of(slot_busy_.begin(), slot_busy_.end(), [](bool busy) { return busy; });
}

void RuntimeInstance::CompletionLoop() {
  const LogScope log_scope(options_.model_name);
  CompletionLoopHooks hooks;
  hooks.handle = [this](const shm::CompletionMessage& msg) { HandleCompletion(msg); };
  hooks.watched = [this] {
    MutexLock lock(&mu_);
    return !stopped_ && dead_reason_.empty();
  };
  hooks.kill_if_hung = [this] { return KillIfHung(); };
  hooks.dead = [this](const std::string& why) { MarkDead(why); };
  RunCompletionLoop(segment_.get(), launcher_, pid_,
                    "runtime " + options_.model_name + "/" + std::to_string(options_.index),
                    kPollInterval, hooks);
}

std::string RuntimeInstance::KillIfHung() {
  MutexLock lock(&mu_);
  if (stopped_ || !dead_reason_.empty()) return "";
  int64_t rows = 0;
  for (const auto& r : running_) rows += r.has_value() ? r->rows : 0;
  if (rows == 0) return "";
  return KillIfOverdue(hang_watch_, std::chrono::steady_clock::now(), launcher_, pid_,
                       std::to_string(rows) + " row(s) to compute");
}

void RuntimeInstance::HandleTopUpQuery(const shm::CompletionMessage& msg) {
  shm::BatchMessage answer;
  std::memset(&answer, 0, sizeof(answer));
  answer.batch_id = msg.batch_id;
  answer.slot = msg.slot;
  answer.flags = shm::kGrantFinal;
  TopUpQuery query;
  std::shared_ptr<InferenceRequest> like;  // keeps query.like valid
  {
    MutexLock lock(&mu_);
    if (msg.slot < running_.size() && running_[msg.slot] && !running_[msg.slot]->ranges.empty()) {
      const WorkSlice& running = *running_[msg.slot];
      like = running.ranges.front().request;
      query.rows = running.rows;
      // Room left in rows, and in the slab's bytes after the running slice's inputs.
      const uint64_t used = slot_used_[msg.slot];
      const uint64_t room =
          segment_->input_capacity() > used ? segment_->input_capacity() - used : 0;
      query.max_rows = std::min(options_.batch - running.rows, RowsThatFit(*like, room));
    }
  }
  query.stages_done = static_cast<int>(msg.stages_done);
  query.num_stages = static_cast<int>(msg.num_stages);
  query.elapsed = std::chrono::nanoseconds(msg.compute_ns);
  query.like = like.get();
  TopUpGrant grant;
  if (like && options_.top_up && query.max_rows > 0) grant = options_.top_up(query);
  WorkSlice joining;
  Status failed;
  if (grant.rows > 0) {
    joining.rows = grant.rows;
    for (auto& r : grant.requests) joining.ranges.push_back({r, 0, r->rows()});
    MutexLock lock(&mu_);
    if (msg.slot < running_.size() && running_[msg.slot]) {
      uint8_t* slab = segment_->input_slab(msg.slot);
      const uint64_t used = slot_used_[msg.slot];
      std::vector<TensorView> inputs;
      failed = used <= segment_->input_capacity()
                   ? segment_->BackInput(msg.slot, used + SliceInputBytes(joining))
                   : ResourceExhausted("input slab full");
      if (failed.ok()) {
        failed = GatherInputs(joining, slab + used, segment_->input_capacity() - used, &inputs);
      }
      if (failed.ok()) {
        Describe(inputs, slab, &answer);
        answer.rows = grant.rows;
        answer.flags = 0;
        WorkSlice& running = *running_[msg.slot];
        running.ranges.insert(running.ranges.end(), joining.ranges.begin(), joining.ranges.end());
        running.rows += grant.rows;
        slot_used_[msg.slot] = UsedBytes(inputs, slab);
      }
    } else {
      failed = Unavailable("the batch the rows were to join is gone");
    }
  } else if (!grant.final) {
    answer.flags = 0;  // nothing queued now: the runtime asks again after the next stage
  }
  // One answer per query, and at most one query is outstanding: the two-entry ring has room.
  if (!segment_->topups().TryPush(answer)) {
    PACKRAT_LOG(ERROR) << "top-up ring unexpectedly full";
  }
  if (!failed.ok()) FailSlice(joining, failed);  // rows already taken from the queue
}

void RuntimeInstance::HandleCompletion(const shm::CompletionMessage& msg) {
  {
    MutexLock lock(&mu_);
    hang_watch_.Reported(std::chrono::steady_clock::now());
  }
  if (msg.kind == shm::CompletionKind::kTopUpQuery) return HandleTopUpQuery(msg);
  std::optional<WorkSlice> slice;
  SliceTiming timing;
  {
    MutexLock lock(&mu_);
    if (msg.slot >= running_.size() || !running_[msg.slot].has_value()) {
      PACKRAT_LOG(ERROR) << "completion for idle slot " << msg.slot << " ignored";
      return;
    }
    slice = std::move(running_[msg.slot]);
    running_[msg.slot].reset();
    timing.input = slot_input_[msg.slot];
  }
  // slot_busy_ keeps the slot from being refilled until its outputs are copied out below.
  PACKRAT_LOG(DEBUG) << options_.model_name << "/" << options_.index << ": batch of " << slice->rows
                     << " row(s) computed in " << msg.compute_ns / 1000 << " us";
  if (msg.status != shm::CompletionStatus::kOk) {
    const std::string error(msg.error, strnlen(msg.error, sizeof(msg.error)));
    FailSlice(*slice, msg.status == shm::CompletionStatus::kUnavailable
                          ? Unavailable(error)
                          : Internal("model execution failed: " + error));
  } else if (msg.num_tensors != options_.outputs.size()) {
    FailSlice(*slice,
              Internal("model returned " + std::to_string(msg.num_tensors) +
                       " outputs, the config declares " + std::to_string(options_.outputs.size())));
  } else {
    const auto copy_start = std::chrono::steady_clock::now();
    const uint8_t* slab = segment_->output_slab(msg.slot);
    const uint64_t cap = segment_->output_capacity();
    std::vector<TensorView> outputs(msg.num_tensors);
    Status valid;
    for (uint32_t i = 0; i < msg.num_tensors && valid.ok(); ++i) {
      const shm::TensorDesc& d = msg.tensors[i];
      if (d.ndim < 1 || d.ndim > shm::kMaxDims || d.offset > cap || d.byte_size > cap - d.offset) {
        valid = Internal("runtime sent a malformed output descriptor");
        break;
      }
      TensorView& v = outputs[i];
      v.name = options_.outputs[i].name;
      v.datatype = static_cast<DataType>(d.datatype);
      v.shape.assign(d.shape, d.shape + d.ndim);
      v.data = slab + d.offset;
      v.byte_size = d.byte_size;
      if (v.shape[0] != slice->rows) {
        valid = Internal("model output '" + v.name + "' has " + std::to_string(v.shape[0]) +
                         " rows for a batch of " + std::to_string(slice->rows));
      }
    }
    if (valid.ok()) {
      ScatterOutputs(*slice, outputs, [&] {
        if (!options_.on_slice_computed) return;
        timing.rows = slice->rows;
        timing.requests = static_cast<int64_t>(slice->ranges.size());
        timing.compute = std::chrono::nanoseconds(msg.compute_ns);
        timing.output = std::chrono::steady_clock::now() - copy_start;
        for (uint32_t k = 0; k < std::min<uint32_t>(msg.num_stages, shm::kMaxStages); ++k) {
          timing.stages.emplace_back(msg.stage_ns[k]);
        }
        options_.on_slice_computed(timing);
      });
    } else {
      FailSlice(*slice, valid);
    }
  }
  if (slice->on_done) slice->on_done();

  std::vector<std::pair<WorkSlice, Status>> failed;
  {
    MutexLock lock(&mu_);
    slot_busy_[msg.slot] = false;
    failed = FillSlotsLocked();
    if (IdleLocked()) idle_cv_.NotifyAll();
  }
  for (auto& [s, status] : failed) {
    FailSlice(s, status);
    if (s.on_done) s.on_done();
  }
}

void RuntimeInstance::MarkDead(const std::string& why) {
  std::vector<WorkSlice> orphans;
  bool was_stopped;
  {
    MutexLock lock(&mu_);
    was_stopped = stopped_;
    dead_reason_ = why;
    accepting_ = false;
    for (auto& r : running_) {
      if (r.has_value()) orphans.push_back(std::move(*r));
      r.reset();
    }
    std::fill(slot_busy_.begin(), slot_busy_.end(), false);
    for (auto& q : queued_) orphans.push_back(std::move(q));
    queued_.clear();
    idle_cv_.NotifyAll();
  }
  if (!was_stopped && options_.on_death) {
    PACKRAT_LOG(ERROR) << why << " with " << orphans.size() << " slice(s) queued or running";
    options_.on_death(std::move(orphans), why);
    return;
  }
  if (!was_stopped || !orphans.empty()) {
    PACKRAT_LOG(ERROR) << why << "; failing " << orphans.size() << " slice(s)";
  }
  for (WorkSlice& s : orphans) {
    FailSlice(s, Unavailable(why));
    if (s.on_done) s.on_done();
  }
}

void RuntimeInstance::Stop(std::chrono::milliseconds drain) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    accepting_ = false;
    const auto deadline = std::chrono::steady_clock::now() + drain;
    while (!IdleLocked() && idle_cv_.WaitUntil(&mu_, deadline)) {
    }
    stopped_ = true;
  }
  segment_->requests().Close();  // the runtime leaves its loop and exits 0
  segment_->topups().Close();
  if (!launcher_->Wait(pid_, std::chrono::seconds(5))) {
    PACKRAT_LOG(WARNING) << "runtime pid " << pid_ << " did not exit; killing it";
    launcher_->Signal(pid_, SIGKILL);
    launcher_->Wait(pid_, std::chrono::seconds(5));
  }
  segment_->completions().Close();
  if (completion_thread_.joinable()) completion_thread_.join();
  MarkDead("instance stopped");  // fails whatever did not drain in time
  segment_.reset();              // unmaps and removes the shared-memory name
}

}  // namespace packrat
