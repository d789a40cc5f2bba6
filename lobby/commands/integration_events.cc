#include "lobby/commands/integration_events.h"

#include <utility>

#include "lobby/commands/interpreter.h"

namespace warren {

IntegrationEvents::Subscription::Subscription(Subscription&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), id_(std::exchange(other.id_, 0)) {}

IntegrationEvents::Subscription& IntegrationEvents::Subscription::operator=(
    Subscription&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void IntegrationEvents::Subscription::Reset() {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->Unsubscribe(id_);
}

IntegrationEvents::Subscription IntegrationEvents::Subscribe(Callback callback) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(callback));
  return Subscription(this, id);
}

void IntegrationEvents::Notify(std::string_view owner) {
  std::lock_guard lock(mu_);
  for (const auto& [id, callback] : callbacks_) callback(owner);
}

size_t IntegrationEvents::size() const {
  std::lock_guard lock(mu_);
  return callbacks_.size();
}

void IntegrationEvents::Unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);
  callbacks_.erase(id);
}

void NotifyIntegrations(Services& services, std::string_view owner) {
  if (services.integration_events != nullptr) services.integration_events->Notify(owner);
}

}  // namespace warren
