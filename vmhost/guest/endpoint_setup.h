// The guest half of the integrations endpoint: the shell script the host runs in a VM (as
// root, through `sudo -n`) on every control connection before asking for the endpoint's
// forwards, and again when a VM's integrations change. It redirects the guest's own
// connections to address:80/:443 to the high ports the forwards listen on (a NAT rule: nft,
// else iptables; without either — tiny — the forwards hold 80/443 themselves and the port
// sysctl is lowered for them), rewrites warren's marked block in /etc/hosts
// (NAME.<domain> -> the endpoint address, for each name given), and installs warren's CA
// certificate where the guest has a CA store (Debian's update-ca-certificates; an image
// without one — tiny — gets http only). Its one stdout line says which ports the forwards
// must take (ParseEndpointSetupReport). Pure; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vmhost/guest_control.h"

namespace warren::guest {

// The setup's exit status when it had to let the guest's control sshd bind the address the
// host names (GatewayPorts clientspecified, absent from images built before the endpoint):
// the running sshd read its config before, so the forwards need a new connection.
inline constexpr int kEndpointSetupReconnect = 75;

// The marker lines of warren's block in the guest's /etc/hosts.
inline constexpr const char* kHostsBegin = "# BEGIN warren integrations";
inline constexpr const char* kHostsEnd = "# END warren integrations";

// A name goes into /etc/hosts only if it is one DNS label ([A-Za-z0-9-], 1-63, no leading
// or trailing '-'); others are left out (the proxy would not match them either).
bool ValidEndpointName(const std::string& name);

// The names of warren's own NAT rules in the guest: an nft table (replaced whole, in one
// transaction), or an iptables chain in the nat table jumped to from OUTPUT.
inline constexpr const char* kNftTable = "warren_int";
inline constexpr const char* kIptablesChain = "WARREN_INT";

// The command line for the guest user's shell: `sudo -n /bin/sh -c '…'`, which writes its
// diagnostics to stderr (the host keeps its first bytes for the log), one report line to
// stdout (when it got that far) and exits 0 when every step worked. `names`: the
// integrations attached (empty: the block is removed). `want_ports`: false when the VM gets
// no endpoint (the redirect is removed, the port sysctl left alone).
std::string EndpointSetupCommand(const GuestEndpoint& endpoint,
                                 const std::vector<std::string>& names, bool want_ports);

// What the setup's stdout said about the forwards' ports.
struct EndpointSetupReport {
  enum class Mode {
    kUnknown,   // no report line (sudo refused, the script failed early, or a guest's lie)
    kRedirect,  // address:http_port/https_port lead to the listen ports: listen there
    kDirect,    // no redirect: the forwards listen on http_port/https_port themselves
  };
  Mode mode = Mode::kUnknown;
  // kRedirect: the tool that made it ("nft", "iptables"); kDirect: why there is none. One
  // line, sanitized, bounded.
  std::string detail;
};
EndpointSetupReport ParseEndpointSetupReport(std::string_view stdout_text);

}  // namespace warren::guest
