// packrat-runtime: one thin model instance. Launched by packrat-agent (never by hand) with the
// shared-memory segment it serves; see docs/architecture.md for the protocol.
//
//   packrat-runtime --version              (prints the libtorch version; profiles are keyed by it)
//   packrat-runtime --segment NAME --model PATH --threads T [--cores 0,1] [--agent-pid PID]
//                   [--input FP32:3,224,224]... [--output-type FP32]... [--warmup-batch 4]...
//                   [--warmup-iterations 3] [--name demo/0]
//                   [--precision bf16] [--memory-format channels_last] [--freeze]
//                   [--accuracy-samples 8] [--accuracy-max-rel-error 0.05]
//                   [--accuracy-min-top1 0.9] [--accuracy-strict] [--idle-spin-us 100]
//                   [--idle-start-s 3] [--warmup always|while-idle]
//   packrat-runtime --generate --segment NAME --model PATH --threads T --slots S
//                   [--refill half|step|static] [--cores 0,1] [--agent-pid PID] [--name gpt/0]
//
// Exit codes: 0 orderly shutdown, 1 start-up failure (also recorded in the segment), 2 usage.
#include <malloc.h>
#include <sched.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/idle_priority.h"
#include "common/logging.h"
#include "runtime/decoder.h"
#include "runtime/generation_loop.h"
#include "runtime/model_runner.h"
#include "runtime/runtime_flags.h"
#include "runtime/runtime_lifecycle.h"
#include "runtime/worker.h"
#include "shm/segment.h"

namespace packrat::runtime {
namespace {

struct Flags {
  CommonFlags common;  // --segment, --name, --threads, --cores, --warmup-*, ...
  std::string model;
  std::vector<InputSpec> inputs;
  std::vector<DataType> output_types;
  Optimization optimization;
  AccuracyGuard guard;
  bool generate = false;  // a generative model: the decode loop instead of batches
  int slots = 1;          // generate: sequences decoded together
  RefillPolicy refill = RefillPolicy::kHalf;
};

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--freeze") {  // the flags without a value
      f.optimization.freeze = true;
      continue;
    }
    if (flag == "--accuracy-strict") {
      f.guard.strict = true;
      continue;
    }
    if (flag == "--generate") {
      f.generate = true;
      continue;
    }
    if (i + 1 >= argc) return InvalidArgument("flag " + flag + " needs a value");
    const std::string value = argv[++i];
    ASSIGN_OR_RETURN(const bool common, ParseCommonFlag(flag, value, &f.common));
    if (common) continue;
    if (flag == "--model") {
      f.model = value;
    } else if (flag == "--input") {  // DTYPE:d1,d2,...  (row shape; may be empty)
      InputSpec spec;
      RETURN_IF_ERROR(ParseRowSpec(flag, value, &spec.datatype, &spec.row_shape));
      f.inputs.push_back(std::move(spec));
    } else if (flag == "--output-type") {
      const auto type = DataTypeFromName(value);
      f.output_types.push_back(type ? *type : DataType::kInvalid);
    } else if (flag == "--precision") {
      if (value != "bf16" && value != "fp32") return InvalidArgument("bad --precision " + value);
      f.optimization.bf16 = value == "bf16";
    } else if (flag == "--memory-format") {
      if (value != "channels_last" && value != "contiguous") {
        return InvalidArgument("bad --memory-format " + value);
      }
      f.optimization.channels_last = value == "channels_last";
    } else if (flag == "--accuracy-samples") {
      f.guard.samples = std::atoi(value.c_str());
    } else if (flag == "--accuracy-max-rel-error") {
      f.guard.max_rel_error = std::atof(value.c_str());
    } else if (flag == "--accuracy-min-top1") {
      f.guard.min_top1_agreement = std::atof(value.c_str());
    } else if (flag == "--slots") {
      f.slots = std::atoi(value.c_str());
    } else if (flag == "--refill") {
      if (value == "half") {
        f.refill = RefillPolicy::kHalf;
      } else if (value == "step") {
        f.refill = RefillPolicy::kStep;
      } else if (value == "static") {
        f.refill = RefillPolicy::kStatic;
      } else {
        return InvalidArgument("bad --refill " + value);
      }
    } else {
      return InvalidArgument("unknown flag " + flag);
    }
  }
  if (f.common.segment.empty() || f.model.empty())
    return InvalidArgument("--segment and --model are required");
  if (f.common.threads < 1) return InvalidArgument("--threads must be >= 1");
  if (f.slots < 1) return InvalidArgument("--slots must be >= 1");
  return f;
}

Status PinToCores(const std::vector<int>& cores) {
  if (cores.empty()) return Status::Ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Internal("sched_setaffinity failed: " + std::string(strerror(errno)));
  }
  return Status::Ok();
}

// Keeps freed tensor memory in the process. By default glibc serves blocks above its mmap
// threshold with mmap and unmaps them on free, so every forward() page-faults its activations
// in afresh. Measured through the agent, ResNet-50 <1 instance, 2 threads, batch 4>: 270 ms per
// batch by default, 203 ms with this (the profile, taken in a runtime whose heap had grown at a
// larger batch first, says 189 ms). A runtime is a dedicated process whose peak is reached in
// warm-up, so holding on to it costs nothing extra.
void KeepFreedMemory() {
  mallopt(M_MMAP_MAX, 0);              // serve every size from the heap, reuse it
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // do not give the heap top back to the kernel
}

int Main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::cout << "libtorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
              << TORCH_VERSION_PATCH << "\n";
    return 0;
  }
  auto flags_or = ParseFlags(argc, argv);
  if (!flags_or.ok()) {
    std::cerr << "packrat-runtime: " << flags_or.status().message() << "\n";
    return 2;
  }
  const Flags& flags = *flags_or;
  SetLogComponent("runtime[" + flags.common.name + "]");
  auto segment_or = AttachToAgent(flags.common.segment, flags.common.agent_pid);
  if (!segment_or.ok()) {
    PACKRAT_LOG(ERROR) << segment_or.status().ToString();
    return 1;
  }
  std::unique_ptr<shm::Segment> segment = std::move(segment_or).value();
  auto fail = [&segment](const Status& s) { return FailStart(segment.get(), s); };
  if (Status s = PinToCores(flags.common.cores); !s.ok()) return fail(s);
  KeepFreedMemory();
  // Beside a serving set the agent starts a runtime at idle priority (common/idle_priority.h)
  // and moves it back at its limit (--idle-start-s) or once starved; the runtime itself moves
  // back once ready (report_ready), so that it never serves there.
  // The load report, once loaded and warmed up; serving runs at normal priority.
  auto report_ready = [&segment](const std::string& report) {
    // Every thread, also where the agent already moved the main one back (only SCHED_IDLE
    // ones change); the agent checks again once the runtime reports ready.
    if (Status s = LeaveIdlePriority(getpid()); !s.ok()) PACKRAT_LOG(WARNING) << s.message();
    segment->SetInfo(report);
  };

  if (flags.generate) {
    auto decoder_or = LoadTorchDecoder(flags.model, flags.common.threads, flags.slots);
    if (!decoder_or.ok()) return fail(decoder_or.status());
    std::unique_ptr<Decoder> decoder = std::move(decoder_or).value();
    const DecoderShape& shape = decoder->shape();
    report_ready("kernel=fp32 layers=" + std::to_string(shape.layers) + " heads=" +
                 std::to_string(shape.heads) + " max_len=" + std::to_string(shape.max_len) +
                 " vocab=" + std::to_string(shape.vocab) + " slots=" + std::to_string(flags.slots));
    PACKRAT_LOG(INFO) << "ready: generative model " << flags.model << ", " << flags.common.threads
                      << " thread(s), " << flags.slots << " slot(s)";
    GenerationOptions o;
    o.refill = flags.refill;
    o.agent_pid = flags.common.agent_pid;
    GenerationLoop loop(segment.get(), decoder.get(), o);
    return ServeUntilStopped(segment.get(), [&loop] { return loop.Run(); });
  }

  ModelRunnerOptions options;
  options.model_path = flags.model;
  options.threads = flags.common.threads;
  options.output_types = flags.output_types;
  options.optimization = flags.optimization;
  options.guard = flags.guard;
  options.inputs = flags.inputs;
  auto runner_or = ModelRunner::Create(options);
  if (!runner_or.ok()) return fail(runner_or.status());
  std::unique_ptr<ModelRunner> runner = std::move(runner_or).value();
  // An output slab's pages are backed before outputs are written there, as far as they reach
  // (the slabs are sparse): writing into a full /dev/shm would end this process with SIGBUS;
  // this way the batch fails with the reason and the runtime serves on.
  runner->set_output_backing([&segment](uint8_t* out, size_t bytes) {
    for (uint32_t slot = 0; slot < segment->num_slots(); ++slot) {
      if (segment->output_slab(slot) == out) return segment->BackOutput(slot, bytes);
    }
    return Status::Ok();  // not a slab: nothing to back
  });
  // Pass by pass: with --warmup while-idle, a start no longer at idle priority (starved, or
  // never there) stops warming up and serves cold, as its CPUs are busy.
  bool warmed = true;
  for (int64_t b : flags.inputs.empty() ? std::vector<int64_t>{} : flags.common.warmup_batches) {
    for (int i = 0; warmed && i < flags.common.warmup_iterations; ++i) {
      warmed = !flags.common.warmup_while_idle || sched_getscheduler(0) == SCHED_IDLE;
      if (!warmed) break;
      if (Status s = runner->Warmup(flags.inputs, {b}, 1); !s.ok()) return fail(s);
    }
  }
  report_ready(runner->report().ToString() + (warmed ? "" : " warmed=0"));
  PACKRAT_LOG(INFO) << "ready: model " << flags.model << ", " << flags.common.threads
                    << " thread(s)";

  WorkerOptions worker_options;  // the default poll interval: an idle runtime sleeps
  worker_options.agent_pid = flags.common.agent_pid;
  worker_options.idle_spin = std::chrono::microseconds(std::max(0, flags.common.idle_spin_us));
  Worker worker(segment.get(), runner.get(), worker_options);
  return ServeUntilStopped(segment.get(), [&worker] { return worker.Run(); });
}

}  // namespace
}  // namespace packrat::runtime

int main(int argc, char** argv) { return packrat::runtime::Main(argc, argv); }
