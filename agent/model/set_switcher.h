// SetSwitcher: what the control thread (ModelController) needs of a model's instance sets — a
// seam, so that the control loop is tested against a fake without starting runtimes.
// InstanceSets is the implementation.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/model/instance_set.h"
#include "agent/planning/instance_group.h"
#include "agent/planning/optimizer.h"
#include "common/status.h"

namespace packrat {

class SetSwitcher {
 public:
  virtual ~SetSwitcher() = default;

  // The set being served (null before the first one). Any thread.
  virtual std::shared_ptr<InstanceSet> active() const = 0;
  // Whether a runtime of the active set has died. Any thread.
  virtual bool ActiveHasDeadRuntime() const = 0;
  // Thread counts of the live parked runtimes. Any thread.
  virtual std::vector<int> LiveParkedThreads() const = 0;
  // Thread counts of the live serving runtimes that a new set may keep: those inside the
  // model's share of the node (all of them without one), in serving order. Any thread.
  virtual std::vector<int> KeepableThreads() const = 0;
  // How many CPUs the model may place on (its share, or the node) hold no live runtime; -1
  // where placement is not tracked. Any thread.
  virtual int FreeCpus() const = 0;
  // How long starting runtimes took, in seconds, from the start (or the switch) to serving:
  // the first set's (`first`, the model's load at start) and the latest switch that started
  // any (`last`); 0 where none yet. Any thread.
  struct StartTimes {
    double first = 0;
    double last = 0;
  };
  virtual StartTimes start_times() const = 0;
  // Serves `groups` as the next set (InstanceSets::Switch). One thread at a time; blocks while
  // the new set starts and returns once it serves; the set it replaced drains afterwards.
  virtual Status Switch(const std::vector<InstanceGroup>& groups, const std::optional<Plan>& plan,
                        const std::string& reason, bool restart) = 0;
  // Blocks until every set replaced so far has drained and its runtimes not kept are parked or
  // stopped (their CPUs free). Any thread.
  virtual void WaitRetired() const = 0;
};

}  // namespace packrat
