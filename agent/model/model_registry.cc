#include "agent/model/model_registry.h"

#include "agent/model/served_model.h"

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
  transitions_.erase(name);
  failed_at_start_.erase(name);
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

void ModelRegistry::BeginTransition(const std::string& name, std::string what) {
  MutexLock lock(&mu_);
  transitions_[name] = std::move(what);
}

void ModelRegistry::EndTransition(std::string_view name) {
  MutexLock lock(&mu_);
  if (const auto it = transitions_.find(name); it != transitions_.end()) transitions_.erase(it);
}

void ModelRegistry::FailedAtStart(const std::string& name, std::string reason) {
  MutexLock lock(&mu_);
  failed_at_start_[name] = std::move(reason);
}

Status ModelRegistry::Absent(std::string_view name) const {
  const std::string quoted = "model '" + std::string(name) + "'";
  MutexLock lock(&mu_);
  if (const auto it = transitions_.find(name); it != transitions_.end()) {
    return Unavailable(quoted + " is " + it->second);
  }
  if (const auto it = failed_at_start_.find(name); it != failed_at_start_.end()) {
    return Unavailable(quoted + " failed to load at start: " + it->second);
  }
  return NotFound("unknown " + quoted);
}

bool ModelRegistry::Ready() const {
  MutexLock lock(&mu_);
  if (starting_) return false;
  if (!strict_) return true;
  if (!failed_at_start_.empty()) return false;
  for (const auto& [name, model] : models_) {
    if (model->state() != ModelState::kReady) return false;
  }
  return true;
}

void ModelRegistry::set_starting(bool starting) {
  MutexLock lock(&mu_);
  starting_ = starting;
}

void ModelRegistry::set_strict_readiness(bool strict) {
  MutexLock lock(&mu_);
  strict_ = strict;
}

}  // namespace packrat
