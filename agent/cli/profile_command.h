// `packrat profile`: measures L[t,b] of one model of an agent config with real pinned runtimes
// and writes the profile CSV (the format `packrat plan` reads).
//
//   packrat profile --config FILE.yaml --model NAME [--threads 1-T] [--batches 1,2,4,...]
//                   --out FILE.csv [--runtime PATH] [--target-error 0.02]
//                   [--max-seconds-per-point 20]
//
// Resumable: FILE.csv.key records the model hash and machine fingerprint; an existing partial
// FILE.csv with the same key is continued, one with another key is measured anew. A progress
// bar with ETA is drawn on a terminal; otherwise one line per point.
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace packrat {

int RunProfileCommand(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

}  // namespace packrat
