// ⟨count, threads, batch⟩: `count` instances, each with `threads` intra-op threads, each
// running batches of `batch` rows. A plan (from the optimizer or the config) is a list of them.
#pragma once

namespace packrat {

struct InstanceGroup {
  int count = 0;
  int threads = 0;
  int batch = 0;

  bool operator==(const InstanceGroup&) const = default;
};

}  // namespace packrat
