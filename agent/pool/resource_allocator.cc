#include "agent/pool/resource_allocator.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace packrat {

CpuLease& CpuLease::operator=(CpuLease&& other) noexcept {
  if (this != &other) {
    if (owner_) owner_->Release(cpus_);
    owner_ = other.owner_;
    cpus_ = std::move(other.cpus_);
    other.owner_ = nullptr;
    other.cpus_.clear();
  }
  return *this;
}

CpuLease::~CpuLease() {
  if (owner_) owner_->Release(cpus_);
}

ResourceAllocator::ResourceAllocator(CpuTopology topology, int thread_budget)
    : topology_(std::move(topology)),
      thread_budget_(std::clamp(thread_budget, 0, static_cast<int>(topology_.cpus().size()))),
      holders_(topology_.cpus().size(), 0) {
  const auto& cpus = topology_.cpus();
  std::map<std::pair<int, int>, int> seen;  // (socket, core) -> CPUs met so far
  for (const CpuInfo& c : cpus) sibling_rank_.push_back(seen[{c.socket, c.core}]++);
}

StatusOr<std::vector<Placement>> ResourceAllocator::Place(const std::vector<int>& threads,
                                                          const std::vector<int>& exclude) const {
  const auto& cpus = topology_.cpus();
  std::vector<int> holders;
  {
    MutexLock lock(&mu_);
    holders = holders_;
  }
  std::vector<bool> taken(cpus.size(), false);
  for (size_t i = 0; i < cpus.size(); ++i) {
    taken[i] = std::find(exclude.begin(), exclude.end(), cpus[i].cpu) != exclude.end();
  }
  // Preference order of rule 4 (within a socket).
  auto better = [&](size_t a, size_t b) {
    if (holders[a] != holders[b]) return holders[a] < holders[b];
    if (sibling_rank_[a] != sibling_rank_[b]) return sibling_rank_[a] < sibling_rank_[b];
    return cpus[a].cpu < cpus[b].cpu;
  };
  const std::vector<int> sockets = topology_.sockets();

  std::vector<size_t> order(threads.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return threads[a] > threads[b]; });
  std::vector<Placement> out(threads.size());
  size_t next_socket = 0;
  for (size_t k : order) {
    const size_t want = static_cast<size_t>(std::max(threads[k], 0));
    // The best `want` free CPUs of each socket, and their total holders.
    std::vector<size_t> chosen;
    long best_cost = -1;
    for (size_t s = 0; s < sockets.size(); ++s) {
      const int socket = sockets[(next_socket + s) % sockets.size()];
      std::vector<size_t> free;
      for (size_t i = 0; i < cpus.size(); ++i) {
        if (!taken[i] && cpus[i].socket == socket) free.push_back(i);
      }
      if (free.size() < want) continue;
      std::sort(free.begin(), free.end(), better);
      free.resize(want);
      long cost = 0;
      for (size_t i : free) cost += holders[i];
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        chosen = std::move(free);
      }
    }
    if (best_cost < 0) {  // larger than any socket's free CPUs: span sockets
      std::vector<size_t> free;
      for (size_t i = 0; i < cpus.size(); ++i) {
        if (!taken[i]) free.push_back(i);
      }
      if (free.size() < want) {
        return ResourceExhausted("cannot place an instance of " + std::to_string(want) +
                                 " thread(s): only " + std::to_string(free.size()) +
                                 " CPU(s) left of " + topology_.Describe());
      }
      std::sort(free.begin(), free.end(), better);
      free.resize(want);
      chosen = std::move(free);
    }
    std::set<int> mems;
    for (size_t i : chosen) {
      taken[i] = true;
      out[k].cpus.push_back(cpus[i].cpu);
      mems.insert(cpus[i].node);
    }
    std::sort(out[k].cpus.begin(), out[k].cpus.end());
    out[k].mems.assign(mems.begin(), mems.end());
    if (!chosen.empty() && !sockets.empty()) {
      const int used = cpus[chosen.front()].socket;
      const size_t pos = std::find(sockets.begin(), sockets.end(), used) - sockets.begin();
      next_socket = (pos + 1) % sockets.size();
    }
  }
  return out;
}

CpuLease ResourceAllocator::Hold(const std::vector<int>& cpus) {
  MutexLock lock(&mu_);
  const auto& all = topology_.cpus();
  for (int c : cpus) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].cpu == c) ++holders_[i];
    }
  }
  return CpuLease(this, cpus);
}

void ResourceAllocator::Release(const std::vector<int>& cpus) {
  MutexLock lock(&mu_);
  const auto& all = topology_.cpus();
  for (int c : cpus) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].cpu == c && holders_[i] > 0) --holders_[i];
    }
  }
}

int ResourceAllocator::holders(int cpu) const {
  MutexLock lock(&mu_);
  const auto& all = topology_.cpus();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].cpu == cpu) return holders_[i];
  }
  return 0;
}

Status ResourceAllocator::SetShare(const std::string& model, std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  MutexLock lock(&mu_);
  for (int c : cpus) {
    if (topology_.Find(c) == nullptr) {
      return InvalidArgument("CPU " + std::to_string(c) + " is not one of " + topology_.Describe());
    }
    for (const auto& [other, share] : shares_) {
      if (other != model && std::binary_search(share.begin(), share.end(), c)) {
        return InvalidArgument("CPU " + std::to_string(c) + " belongs to model '" + other + "'");
      }
    }
  }
  shares_[model] = std::move(cpus);
  return Status::Ok();
}

void ResourceAllocator::ReleaseShare(const std::string& model) {
  MutexLock lock(&mu_);
  shares_.erase(model);
}

std::optional<std::vector<int>> ResourceAllocator::Share(const std::string& model) const {
  MutexLock lock(&mu_);
  const auto it = shares_.find(model);
  if (it == shares_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::vector<int>> ResourceAllocator::Shares() const {
  MutexLock lock(&mu_);
  return shares_;
}

std::vector<int> ResourceAllocator::FreeCpus() const {
  MutexLock lock(&mu_);
  std::vector<int> out;
  const auto& all = topology_.cpus();
  for (size_t i = 0; i < all.size(); ++i) {
    if (holders_[i] > 0) continue;
    bool shared = false;
    for (const auto& [model, share] : shares_) {
      shared = shared || std::binary_search(share.begin(), share.end(), all[i].cpu);
    }
    if (!shared) out.push_back(all[i].cpu);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> ResourceAllocator::OutsideShare(const std::string& model) const {
  const std::optional<std::vector<int>> share = Share(model);
  std::vector<int> out;
  if (!share) return out;
  for (const CpuInfo& c : topology_.cpus()) {
    if (!std::binary_search(share->begin(), share->end(), c.cpu)) out.push_back(c.cpu);
  }
  return out;
}

}  // namespace packrat
