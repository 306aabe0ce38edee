#include "emulator/slice_progress.h"

#include <algorithm>
#include <cmath>

namespace packrat::emulator {
namespace {

constexpr double kMinRate = 1e-6;

}  // namespace

SliceProgress::SliceProgress(std::chrono::nanoseconds work, SteadyTime start, double rate)
    : work_(std::max(work, std::chrono::nanoseconds(0))),
      since_(start),
      rate_(std::max(rate, kMinRate)) {}

void SliceProgress::SetRate(SteadyTime at, double rate) {
  at = std::max(at, since_);
  done_ns_ = std::min(static_cast<double>(work_.count()),
                      done_ns_ + static_cast<double>((at - since_).count()) * rate_);
  since_ = at;
  rate_ = std::max(rate, kMinRate);
}

std::chrono::nanoseconds SliceProgress::Done(SteadyTime now) const {
  const double elapsed =
      static_cast<double>(std::max(now - since_, SteadyTime::duration(0)).count());
  const double done = std::min(static_cast<double>(work_.count()), done_ns_ + elapsed * rate_);
  return std::chrono::nanoseconds(static_cast<int64_t>(std::floor(done + 0.5)));
}

SteadyTime SliceProgress::FinishAt() const {
  const double left = std::max(0.0, static_cast<double>(work_.count()) - done_ns_);
  return since_ + std::chrono::duration_cast<SteadyTime::duration>(
                      std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(left / rate_))));
}

}  // namespace packrat::emulator
