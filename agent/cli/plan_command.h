// `packrat plan`: the optimizer's ⟨instances, threads, batch⟩ plan for a profile, per batch size.
//
//   packrat plan --profile FILE.csv [--threads T] --batch B [--batch B2 ...] [--json]
//
// Prints one table row (or, with --json, one JSON object per line) per requested batch size,
// in the order given. For the shared BERT profile at T=16, B=64:
//   {"threads":16,"batch":64,"latency_ms":114.056,"fat_latency_ms":172.477,
//    "expected_speedup":1.51,"instances":[{"count":4,"threads":4,"batch":16}]}
// "threads" is T; latencies are printed exactly as profiled; expected_speedup is rounded to two
// decimals. fat_latency_ms and expected_speedup are null when L[T,B] is not in the profile.
// Every batch is solved before anything is printed, so a failure leaves stdout empty.
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "agent/planning/optimizer.h"

namespace packrat {

int RunPlanCommand(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

// One line of `packrat plan --json` output for `plan` (no trailing newline).
std::string PlanToJson(const Plan& plan);

}  // namespace packrat
