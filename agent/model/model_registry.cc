#include "agent/model/model_registry.h"

namespace packrat {

std::shared_ptr<ServedModel> ModelRegistry::Find(std::string_view name) const {
  MutexLock lock(&mu_);
  const auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ServedModel>> ModelRegistry::List() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  out.reserve(models_.size());
  for (const auto& [name, model] : models_) out.push_back(model);
  return out;
}

size_t ModelRegistry::size() const {
  MutexLock lock(&mu_);
  return models_.size();
}

std::shared_ptr<ServedModel> ModelRegistry::Put(const std::string& name,
                                                std::shared_ptr<ServedModel> model) {
  MutexLock lock(&mu_);
  ++version_;
  std::shared_ptr<ServedModel>& slot = models_[name];
  std::swap(slot, model);
  return model;
}

std::shared_ptr<ServedModel> ModelRegistry::Remove(std::string_view name) {
  MutexLock lock(&mu_);
  const auto it = models_.find(name);
  if (it == models_.end()) return nullptr;
  std::shared_ptr<ServedModel> gone = std::move(it->second);
  models_.erase(it);
  ++version_;
  return gone;
}

uint64_t ModelRegistry::version() const {
  MutexLock lock(&mu_);
  return version_;
}

}  // namespace packrat
