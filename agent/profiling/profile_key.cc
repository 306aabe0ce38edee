#include "agent/profiling/profile_key.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include "agent/pool/cpu_topology.h"

namespace packrat {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t Fnv(const char* data, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

StatusOr<std::string> RuntimeVersion(const std::string& runtime_path) {
  const std::string cmd = "'" + runtime_path + "' --version 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot run " + runtime_path);
  char buf[256] = {0};
  const bool got = std::fgets(buf, sizeof(buf), pipe) != nullptr;
  const int rc = pclose(pipe);
  if (!got || rc != 0) return Unavailable("'" + runtime_path + " --version' failed");
  std::string v(buf);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  if (v.rfind("libtorch ", 0) == 0) v.erase(0, 9);
  return v;
}

}  // namespace

StatusOr<std::string> HashFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read '" + path + "'");
  std::vector<char> buf(1 << 20);
  uint64_t h = kFnvOffset;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = Fnv(buf.data(), static_cast<size_t>(in.gcount()), h);
  }
  return Hex(h);
}

std::string ProfileKey::ToString() const {
  return "model=" + model_hash + " cpu=" + cpu_model + " cores=" + std::to_string(usable_cores) +
         " libtorch=" + libtorch + " kernel=" + kernel + " load=" + load;
}

std::string ProfileKey::Digest() const {
  const std::string s = ToString();
  return Hex(Fnv(s.data(), s.size(), kFnvOffset));
}

StatusOr<ProfileKey> ComputeProfileKey(const std::string& model_path,
                                       const std::string& runtime_path, const std::string& kernel,
                                       const std::string& load) {
  ProfileKey key;
  key.kernel = kernel;
  key.load = load;
  ASSIGN_OR_RETURN(key.model_hash, HashFile(model_path));
  key.cpu_model = CpuModel();
  key.usable_cores = static_cast<int>(AffinityCpus().size());
  ASSIGN_OR_RETURN(key.libtorch, RuntimeVersion(runtime_path));
  return key;
}

}  // namespace packrat
