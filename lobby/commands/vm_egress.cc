#include "lobby/commands/vm_egress.h"

namespace warren {

std::string EgressPolicyChoices() {
  std::string out;
  for (std::string_view p : kEgressPolicies) out += (out.empty() ? "" : "|") + std::string(p);
  return out;
}

Result<std::string> ParseEgressPolicy(std::string_view flag, std::string_view text) {
  if (text == "full") return std::string("all");
  for (std::string_view p : kEgressPolicies) {
    if (text == p) return std::string(p);
  }
  return InvalidArgument(std::string(flag) + " takes " + EgressPolicyChoices() + ", not \"" +
                         std::string(text.substr(0, 32)) + "\"");
}

Egress HostEgressFor(std::string_view policy) {
  return policy == "all" ? Egress::kAll : Egress::kNone;
}

const char kEgressPolicyHelp[] =
    "Egress, what the VM may reach besides warren's own connection into it:\n"
    "  all           the internet, through outbound NAT; never this host itself, other VMs,\n"
    "                private, link-local or multicast addresses (unless the server opens a\n"
    "                range with --vm-egress-allow)\n"
    "  integrations  no network device: only the integrations attached to the VM\n"
    "  none          no network device and no integrations: nothing at all\n";

}  // namespace warren
