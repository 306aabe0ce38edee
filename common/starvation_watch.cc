#include "common/starvation_watch.h"

namespace packrat {

StarvationWatch::StarvationWatch(SteadyTime start, std::chrono::nanoseconds window,
                                 double min_share)
    : window_(window), min_share_(min_share), window_start_(start) {}

bool StarvationWatch::Starved(SteadyTime now, std::chrono::nanoseconds progress) {
  if (starved_) return true;
  const std::chrono::nanoseconds elapsed = now - window_start_;
  if (elapsed < window_) return false;
  const double got = static_cast<double>((progress - done_at_window_start_).count());
  if (got < min_share_ * static_cast<double>(elapsed.count())) {
    starved_ = true;
    return true;
  }
  window_start_ = now;
  done_at_window_start_ = progress;
  return false;
}

}  // namespace packrat
