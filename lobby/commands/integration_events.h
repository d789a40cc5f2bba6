// IntegrationEvents: tells whoever serves integrations (the integration proxy) that what an
// owner's VMs may reach has changed — an integration added, removed, renamed, attached or
// detached, or a VM's tags changed (tag:T attachments follow tags) — so it can drop
// connections that lost their attachment and refresh the names written into guests. The
// commands notify once their store change has committed (NotifyIntegrations); a subscriber
// re-reads the store (integration_access.h) rather than trusting the event's details.
//
// Thread-safe. A callback runs on the notifying thread with the registry's lock held: it must
// be quick, must not block and must not call back into the registry. Once a Subscription is
// destroyed its callback neither runs nor will.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>

namespace warren {

struct Services;

class IntegrationEvents {
 public:
  // `owner`: the user whose integrations or VMs changed.
  using Callback = std::function<void(std::string_view owner)>;

  // Ends the subscription when destroyed. Move-only.
  class Subscription {
   public:
    Subscription() = default;
    ~Subscription() { Reset(); }
    Subscription(Subscription&& other) noexcept;
    Subscription& operator=(Subscription&& other) noexcept;
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    void Reset();

   private:
    friend class IntegrationEvents;
    Subscription(IntegrationEvents* owner, uint64_t id) : owner_(owner), id_(id) {}
    IntegrationEvents* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Calls `callback` for every Notify until the returned value goes, which must be before
  // this registry goes.
  [[nodiscard]] Subscription Subscribe(Callback callback);
  // Calls every subscriber with `owner`.
  void Notify(std::string_view owner);

  size_t size() const;

 private:
  void Unsubscribe(uint64_t id);

  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Callback> callbacks_;
};

// For a command whose committed store change altered what `owner`'s VMs may reach.
void NotifyIntegrations(Services& services, std::string_view owner);

}  // namespace warren
