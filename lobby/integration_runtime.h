// IntegrationRuntime: the integrations proxy (lobby/integrations) joined to the store and the
// guests — the lookup it asks (integration_access.h over the store, refusing VMs whose
// egress is `none`), warren's integrations CA, the sink the guest control hands VM
// connections to, and a watcher thread that follows changes: told by the interpreter's
// IntegrationEvents that an owner's integrations or VMs changed, it re-checks that owner's
// open proxied connections (cutting those that lost their integration) and rewrites the
// names in their running guests; every `sweep` it keeps the endpoint up on every running
// VM that wants it (a VM started by reconcile or `start` gets it without a command). Lives
// beside main.cc, the one place that joins libvirt, libssh and the interpreter.
// Threads: Create and the destructor on the main thread; the lookup from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "lobby/base/status.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/interpreter.h"
#include "lobby/integrations/endpoint_sink.h"
#include "lobby/integrations/integration_proxy.h"
#include "vmhost/guest_control.h"

namespace warren {

namespace guest {
class SshGuestControl;
}

struct IntegrationRuntimeOptions {
  integrations::IntegrationProxyOptions proxy;  // its domain and TLS server are set by Create
  std::chrono::milliseconds sweep{std::chrono::seconds(10)};
};

class IntegrationRuntime {
 public:
  // Loads or makes DATA/integrations-ca.*, builds the lookup over `services` (store,
  // integration_key, vm_defaults) and the proxy for services.info.int_domain.
  static Result<std::unique_ptr<IntegrationRuntime>> Create(
      const IntegrationRuntimeOptions& options, const std::string& data_dir, Services& services);
  // Stop(), then the proxy goes (cutting its connections). The guest control must be gone
  // by then (it calls the sink) — or never have been given the sink.
  ~IntegrationRuntime();
  // Unsubscribes and stops the watcher, which calls the guest control: before that goes.
  // Idempotent.
  void Stop();

  // What the guest control is made with (SshGuestControlOptions::inbound and ::endpoint).
  GuestInboundSink* sink() { return sink_.get(); }
  GuestEndpoint endpoint() const { return endpoint_; }

  // Once the guest control exists: subscribes to the events and starts the watcher. `guests`
  // and `vms` must outlive this object.
  void Start(guest::SshGuestControl* guests, VmHost* vms);

 private:
  class StoreLookup;
  IntegrationRuntime() = default;
  void Watch();
  void Refresh(const std::string& owner);  // re-check connections, rewrite guests' names
  void KeepEndpointsUp();

  Services* services_ = nullptr;
  std::unique_ptr<StoreLookup> lookup_;
  std::unique_ptr<integrations::IntegrationProxy> proxy_;
  std::unique_ptr<integrations::IntegrationEndpointSink> sink_;
  GuestEndpoint endpoint_;
  std::chrono::milliseconds sweep_{};
  guest::SshGuestControl* guests_ = nullptr;
  VmHost* vms_ = nullptr;
  IntegrationEvents::Subscription subscription_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::set<std::string> dirty_;  // owners to refresh
  std::thread watcher_;
};

}  // namespace warren
