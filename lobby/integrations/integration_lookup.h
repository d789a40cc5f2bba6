// IntegrationLookup: what the integrations proxy asks about a calling VM — which
// integration a name means for it (target and the headers to add, holding the secret), which
// names it has, and whether it gets the endpoint at all. The proxy never reads the store
// itself; the binary wires an implementation over it. Implementations are thread-safe: the
// proxy's workers and the control connections' owner threads call at once (WantsEndpoint
// and NamesFor must be quick: they run on an owner thread).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/integrations/http_head.h"

namespace warren::integrations {

struct IntegrationRoute {
  std::string owner;    // who owns the integration (for RevokeOwner)
  std::string name;     // as the VM named it
  TargetUrl target;     // where to send it, parsed when the integration was added
  HttpHeaders headers;  // added upstream (a bearer is "Authorization: Bearer …"); secret
};

class IntegrationLookup {
 public:
  virtual ~IntegrationLookup() = default;
  // The integration `name` as VM `vm_id` may use it. NotFound: no integration of that name
  // for the VM's owner (404); PermissionDenied with a one-line reason: it exists but is not
  // attached to this VM, or the VM's egress forbids it (403). Other errors answer 502.
  virtual Result<IntegrationRoute> Find(std::string_view vm_id, std::string_view name) = 0;
  // The names attached to the VM (for its /etc/hosts).
  virtual std::vector<std::string> NamesFor(std::string_view vm_id) = 0;
  // Whether the VM gets the endpoint at all (egress `none`: false).
  virtual bool WantsEndpoint(std::string_view vm_id) = 0;
  // Who owns the VM (for the per-user bound on connections); empty when nobody does.
  virtual std::string OwnerOf(std::string_view vm_id) = 0;
};

}  // namespace warren::integrations
