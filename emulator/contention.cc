#include "emulator/contention.h"

#include <algorithm>

namespace packrat::emulator {

double ContentionRate(const ContentionView& view, double neighbour_slowdown) {
  const double shared = 1.0 / std::max<uint32_t>(1, view.max_busy);
  const int others = view.num_cpus - view.own_cpus;
  if (neighbour_slowdown <= 0 || others <= 0) return shared;
  const double busy_others = std::clamp(static_cast<double>(view.busy_cpus) - view.own_cpus, 0.0,
                                        static_cast<double>(others));
  return shared / (1.0 + neighbour_slowdown * busy_others / others);
}

double IdleContentionRate(const ContentionView& view, double neighbour_slowdown) {
  ContentionView alone = view;
  alone.max_busy = 1;
  // None of its CPUs is busy where it runs at all: they count busy now, as its own.
  alone.busy_cpus = view.busy_cpus + static_cast<uint32_t>(view.own_cpus);
  const double rate = ContentionRate(alone, neighbour_slowdown);
  return view.max_busy > 0 ? kIdlePriorityShare * rate : rate;
}

}  // namespace packrat::emulator
