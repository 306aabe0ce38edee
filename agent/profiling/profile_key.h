// What a profile is valid for: the model file, the machine, the kernel settings and how it was
// timed. A stored profile is reused only when all match, and redone when any changes (a new
// CPU, fewer usable cores, another libtorch, another model file, instances timed alone instead
// of next to busy neighbours).
#pragma once

#include <string>

#include "common/status.h"

namespace packrat {

struct ProfileKey {
  std::string model_hash;       // FNV-1a 64 of the model file, 16 hex digits
  std::string cpu_model;        // /proc/cpuinfo "model name"
  int usable_cores = 0;         // this process's affinity mask
  std::string libtorch;         // `packrat-runtime --version`
  std::string kernel = "fp32";  // kernel settings (precision, layout) the runtime runs with
  std::string load =
      "alone";  // ProfileLoad(): "neighbours", "alone" or "decode-steps[-neighbours]"

  // One line, stable: "model=… cpu=… cores=… libtorch=… kernel=… load=…".
  std::string ToString() const;
  // 16 hex digits identifying ToString(); used in file names.
  std::string Digest() const;
};

// Computes the key for `model_path` on this machine, asking `runtime_path` for its libtorch.
// `kernel` is KernelSettings::Key() of the settings the runtimes will use; `load` how the
// points are timed (ProfileLoad()).
StatusOr<ProfileKey> ComputeProfileKey(const std::string& model_path,
                                       const std::string& runtime_path, const std::string& kernel,
                                       const std::string& load);

// FNV-1a 64 of a file's bytes as 16 hex digits. kNotFound if unreadable.
StatusOr<std::string> HashFile(const std::string& path);

}  // namespace packrat
