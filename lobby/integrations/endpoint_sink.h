// IntegrationEndpointSink: the GuestInboundSink the guest control is given, so a VM's
// connections to its integrations endpoint reach the IntegrationProxy (each as a
// GuestPipeStream, tagged with the VM it came from), and the guest is set up from the lookup
// (whether it gets the endpoint; the names for its /etc/hosts). Thread-safe; nothing here
// blocks (it runs on the control connections' owner threads).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/integrations/integration_lookup.h"
#include "lobby/integrations/integration_proxy.h"
#include "vmhost/guest_control.h"

namespace warren::integrations {

class IntegrationEndpointSink final : public GuestInboundSink {
 public:
  // Both must outlive the sink (and the guest control it is handed to).
  IntegrationEndpointSink(IntegrationProxy* proxy, IntegrationLookup* lookup)
      : proxy_(proxy), lookup_(lookup) {}

  bool WantsEndpoint(std::string_view vm_id) override { return lookup_->WantsEndpoint(vm_id); }
  std::vector<std::string> EndpointNames(std::string_view vm_id) override {
    return lookup_->NamesFor(vm_id);
  }
  std::function<void()> Accept(std::string_view vm_id, bool https,
                               std::shared_ptr<GuestPipe> pipe) override;

 private:
  IntegrationProxy* const proxy_;
  IntegrationLookup* const lookup_;
};

}  // namespace warren::integrations
