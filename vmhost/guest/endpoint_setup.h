// The guest half of the integrations endpoint: the shell script the host runs in a VM (as
// root, through `sudo -n`) on every control connection before asking for the endpoint's
// forwards, and again when a VM's integrations change. It lets dev's sshd bind the
// endpoint's ports (net.ipv4.ip_unprivileged_port_start), rewrites warren's marked block in
// /etc/hosts (NAME.<domain> -> the endpoint address, for each name given), and installs
// warren's CA certificate where the guest has a CA store (Debian's update-ca-certificates;
// an image without one — tiny — gets http only). Pure; thread-compatible.
#pragma once

#include <string>
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

// The command line for the guest user's shell: `sudo -n /bin/sh -c '…'`, which writes only
// to stderr (the host keeps its first bytes for the log) and exits 0 when every step
// worked. `names`: the integrations attached (empty: the block is removed).
// `want_ports`: false when the VM gets no endpoint (the port sysctl is left alone).
std::string EndpointSetupCommand(const GuestEndpoint& endpoint,
                                 const std::vector<std::string>& names, bool want_ports);

}  // namespace warren::guest
