#include "agent/pool/decode_instance.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "agent/pool/runtime_process.h"
#include "common/datatype.h"
#include "common/load_report.h"
#include "common/logging.h"

namespace packrat {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(200);

}  // namespace

DecodeInstance::DecodeInstance(DecodeInstanceOptions options, ProcessLauncher* launcher,
                               std::unique_ptr<shm::Segment> segment, pid_t pid)
    : options_(std::move(options)),
      launcher_(launcher),
      segment_(std::move(segment)),
      pid_(pid),
      slot_busy_(segment_->num_slots(), false),
      hang_watch_(options_.slice_timeout, options_.startup_timeout) {
  completion_thread_ = std::thread([this] { CompletionLoop(); });
}

StatusOr<std::unique_ptr<DecodeInstance>> DecodeInstance::Start(
    const DecodeInstanceOptions& options, ProcessLauncher* launcher) {
  if (options.slots < 1 || options.max_prompt_tokens < 1) {
    return InvalidArgument("a generative instance needs slots and max_prompt_tokens >= 1");
  }
  RuntimeProcessOptions p;
  p.label = options.model_name + "/g" + std::to_string(options.generation) + "." +
            std::to_string(options.index);
  p.segment_tag = options.model_name + "." + std::to_string(options.index);
  // One prompt slot per decode slot; requests in flight: prompts plus cancellations.
  p.segment.num_slots = static_cast<uint32_t>(options.slots);
  p.segment.ring_capacity = 16;
  while (p.segment.ring_capacity < 2 * p.segment.num_slots + 8) p.segment.ring_capacity *= 2;
  p.segment.slot_input_bytes = static_cast<uint64_t>(options.max_prompt_tokens) * 8;
  p.segment.slot_output_bytes = shm::kAlign;
  p.startup_timeout = options.startup_timeout;
  LaunchSpec& spec = p.spec;
  spec.path = options.runtime_path;
  spec.cores = options.cores;
  spec.cgroup_procs = options.cgroup_procs;
  spec.args = {"--generate",
               "--model",
               options.model_path,
               "--threads",
               std::to_string(options.threads),
               "--slots",
               std::to_string(options.slots),
               "--refill",
               options.refill,
               "--agent-pid",
               std::to_string(getpid()),
               "--name",
               p.label};
  if (!options.cores.empty()) {
    std::string cores;
    for (int c : options.cores) {
      if (!cores.empty()) cores += ',';
      cores += std::to_string(c);
    }
    spec.args.insert(spec.args.end(), {"--cores", cores});
  }
  p.back_input_slabs = true;  // a prompt's slot is written whole and is small
  ASSIGN_OR_RETURN(RuntimeProcess process, StartRuntimeProcess(p, launcher));
  PACKRAT_LOG(INFO) << "instance " << p.label << " ready: pid " << process.pid << ", "
                    << options.threads << " thread(s), " << options.slots << " decode slot(s), "
                    << process.load_report;
  auto instance = std::unique_ptr<DecodeInstance>(
      new DecodeInstance(options, launcher, std::move(process.segment), process.pid));
  instance->load_report_ = std::move(process.load_report);
  const LoadReport report = LoadReport::Parse(instance->load_report_);
  instance->max_len_ = report.Int("max_len");
  instance->vocab_ = report.Int("vocab");
  return instance;
}

DecodeInstance::~DecodeInstance() { Stop(std::chrono::seconds(5)); }

size_t DecodeInstance::load() const {
  MutexLock lock(&mu_);
  return queued_.size() + running_.size();
}

void DecodeInstance::set_slots_limit(int n) {
  const int limit = n <= 0 || n >= options_.slots ? 0 : n;
  MutexLock lock(&mu_);
  if (stopped_) return;  // Stop() releases the segment once it has set stopped_
  segment_->header()->decode_slots_limit.store(static_cast<uint32_t>(limit),
                                               std::memory_order_release);
}

bool DecodeInstance::alive() const {
  MutexLock lock(&mu_);
  return dead_reason_.empty() && !stopped_;
}

uint64_t DecodeInstance::Submit(std::shared_ptr<GenerateRequest> request) {
  if (const std::optional<uint64_t> id = TrySubmit(request)) return *id;
  uint64_t id;
  std::string why;
  {
    MutexLock lock(&mu_);
    id = next_id_++;
    why = dead_reason_.empty() ? "instance is stopping" : dead_reason_;
  }
  request->on_done(Unavailable(why));
  return id;
}

std::optional<uint64_t> DecodeInstance::TrySubmit(const std::shared_ptr<GenerateRequest>& request) {
  std::vector<std::pair<Entry, Status>> failed;
  uint64_t id;
  {
    MutexLock lock(&mu_);
    if (!accepting_) return std::nullopt;
    id = next_id_++;
    queued_.push_back({id, request});
    failed = SendLocked();
  }
  for (auto& [entry, status] : failed) entry.request->on_done(status);
  return id;
}

std::vector<std::pair<DecodeInstance::Entry, Status>> DecodeInstance::SendLocked() {
  std::vector<std::pair<Entry, Status>> failed;
  for (uint32_t slot = 0; slot < slot_busy_.size() && !queued_.empty(); ++slot) {
    if (slot_busy_[slot]) continue;
    Entry entry = std::move(queued_.front());
    queued_.pop_front();
    const std::vector<int64_t>& prompt = entry.request->prompt;
    const uint64_t bytes = prompt.size() * sizeof(int64_t);
    if (prompt.empty() || bytes > segment_->input_capacity()) {
      failed.emplace_back(
          std::move(entry),
          InvalidArgument("the prompt has " + std::to_string(prompt.size()) + " tokens; at most " +
                          std::to_string(segment_->input_capacity() / 8) + " are accepted"));
      --slot;
      continue;
    }
    std::memcpy(segment_->input_slab(slot), prompt.data(), bytes);
    shm::BatchMessage msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.batch_id = entry.id;
    msg.slot = slot;
    msg.rows = 1;
    msg.flags = shm::kGenerateStart;
    msg.num_tensors = 1;
    shm::TensorDesc& d = msg.tensors[0];
    d.datatype = static_cast<uint8_t>(DataType::kInt64);
    d.ndim = 1;
    d.shape[0] = static_cast<int64_t>(prompt.size());
    d.offset = 0;
    d.byte_size = bytes;
    msg.generate = entry.request->params;
    if (!segment_->requests().TryPush(msg)) {  // cannot happen: capacity > slots + cancels
      queued_.push_front(std::move(entry));
      break;
    }
    slot_busy_[slot] = true;
    if (running_.empty()) hang_watch_.Started(std::chrono::steady_clock::now());
    running_.emplace(entry.id, std::move(entry.request));
  }
  return failed;
}

void DecodeInstance::Cancel(uint64_t id) {
  std::shared_ptr<GenerateRequest> unsent;
  {
    MutexLock lock(&mu_);
    for (auto it = queued_.begin(); it != queued_.end(); ++it) {
      if (it->id == id) {
        unsent = std::move(it->request);
        queued_.erase(it);
        break;
      }
    }
    if (!unsent) {
      if (running_.count(id) == 0 || stopped_ || !dead_reason_.empty()) return;
      shm::BatchMessage msg;
      std::memset(&msg, 0, sizeof(msg));
      msg.batch_id = id;
      msg.flags = shm::kGenerateCancel;
      // The ring holds every prompt slot plus as many cancellations again: a full ring means a
      // burst of cancellations, and the sequence then simply runs to its end.
      if (!segment_->requests().TryPush(msg)) {
        PACKRAT_LOG(WARNING) << options_.model_name << ": request ring full; sequence " << id
                             << " runs to its end";
      } else {
        PACKRAT_LOG(DEBUG) << options_.model_name << ": sequence " << id
                           << ": cancel sent to the runtime";
      }
      return;
    }
    if (IdleLocked()) idle_cv_.NotifyAll();
  }
  PACKRAT_LOG(DEBUG) << options_.model_name << ": sequence " << id
                     << " cancelled before it started";
  unsent->on_done(Cancelled("the client cancelled the request"));
}

void DecodeInstance::CompletionLoop() {
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

void DecodeInstance::HandleCompletion(const shm::CompletionMessage& msg) {
  {
    MutexLock lock(&mu_);
    hang_watch_.Reported(std::chrono::steady_clock::now());
  }
  switch (msg.kind) {
    case shm::CompletionKind::kAccepted: {
      std::vector<std::pair<Entry, Status>> failed;
      {
        MutexLock lock(&mu_);
        if (msg.slot < slot_busy_.size()) slot_busy_[msg.slot] = false;
        // Also while Stop() drains (accepting_ false): the prompts queued before it must
        // reach the runtime, or the drain waits its whole timeout and then fails them.
        if (!stopped_ && dead_reason_.empty()) failed = SendLocked();
      }
      for (auto& [entry, status] : failed) entry.request->on_done(status);
      break;
    }
    case shm::CompletionKind::kTokens:
      if (msg.step_rows > 0 && options_.on_step) {
        options_.on_step(msg.step_rows, std::chrono::nanoseconds(msg.compute_ns));
      }
      for (uint32_t i = 0; i < std::min<uint32_t>(msg.rows, shm::kMaxStepTokens); ++i) {
        const shm::StepToken& t = msg.tokens[i];
        const bool ended = (t.flags & (shm::kTokenFinished | shm::kTokenCancelled)) != 0;
        std::shared_ptr<GenerateRequest> request;
        {
          MutexLock lock(&mu_);
          auto it = running_.find(t.sequence_id);
          if (it == running_.end()) continue;
          request = ended ? std::move(it->second) : it->second;
          if (ended) running_.erase(it);
          if (ended && IdleLocked()) idle_cv_.NotifyAll();
        }
        if (t.flags & shm::kTokenCancelled) {
          PACKRAT_LOG(DEBUG) << options_.model_name << ": sequence " << t.sequence_id
                             << " cancelled; its decode slot is free";
          request->on_done(Cancelled("the client cancelled the request"));
          continue;
        }
        if (request->on_token) request->on_token(t.token, t.prob, ended);
        if (ended) request->on_done(Status::Ok());
      }
      break;
    case shm::CompletionKind::kSequenceFailed: {
      std::shared_ptr<GenerateRequest> request;
      {
        MutexLock lock(&mu_);
        auto it = running_.find(msg.batch_id);
        if (it == running_.end()) break;
        request = std::move(it->second);
        running_.erase(it);
        if (IdleLocked()) idle_cv_.NotifyAll();
      }
      request->on_done(
          InvalidArgument(std::string(msg.error, strnlen(msg.error, sizeof(msg.error)))));
      break;
    }
    default:
      PACKRAT_LOG(ERROR) << options_.model_name << ": unexpected completion kind "
                         << static_cast<uint32_t>(msg.kind);
  }
}

std::string DecodeInstance::KillIfHung() {
  MutexLock lock(&mu_);
  if (stopped_ || !dead_reason_.empty() || running_.empty()) return "";
  return KillIfOverdue(hang_watch_, std::chrono::steady_clock::now(), launcher_, pid_,
                       std::to_string(running_.size()) + " sequence(s) running");
}

void DecodeInstance::MarkDead(const std::string& why) {
  std::vector<std::shared_ptr<GenerateRequest>> orphans;
  bool was_stopped;
  {
    MutexLock lock(&mu_);
    was_stopped = stopped_;
    dead_reason_ = why;
    accepting_ = false;
    for (auto& e : queued_) orphans.push_back(std::move(e.request));
    queued_.clear();
    for (auto& [id, r] : running_) orphans.push_back(std::move(r));
    running_.clear();
    idle_cv_.NotifyAll();
  }
  if (!was_stopped) {
    PACKRAT_LOG(ERROR) << why << "; failing " << orphans.size() << " sequence(s)";
  } else if (!orphans.empty()) {
    PACKRAT_LOG(WARNING) << why << "; failing " << orphans.size() << " unfinished sequence(s)";
  }
  for (auto& r : orphans) r->on_done(Unavailable(why));
  if (!was_stopped && options_.on_death) options_.on_death(why);
}

void DecodeInstance::Stop(std::chrono::milliseconds drain) {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    accepting_ = false;
    const auto deadline = std::chrono::steady_clock::now() + drain;
    while (!IdleLocked() && dead_reason_.empty() && idle_cv_.WaitUntil(&mu_, deadline)) {
    }
    stopped_ = true;
  }
  segment_->requests().Close();  // the runtime leaves its loop and exits 0
  if (!launcher_->Wait(pid_, std::chrono::seconds(5))) {
    PACKRAT_LOG(WARNING) << "runtime pid " << pid_ << " did not exit; killing it";
    launcher_->Signal(pid_, SIGKILL);
    launcher_->Wait(pid_, std::chrono::seconds(5));
  }
  segment_->completions().Close();
  if (completion_thread_.joinable()) completion_thread_.join();
  MarkDead("instance stopped");  // fails whatever did not finish in time
  segment_.reset();
}

}  // namespace packrat
