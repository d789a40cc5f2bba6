// VmRuntime: what `warren serve` needs to run VMs — the VM hosts (vm_hosts.h), the guest
// control connections and warren's control key — started together and wired into the
// interpreter's Services. Lives beside main.cc because it is the one place that joins libvirt,
// libssh and the interpreter. Start and the destructor run on the main thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/usage_meter.h"
#include "lobby/integration_runtime.h"
#include "lobby/vm_hosts.h"
#include "vmhost/egress_firewall.h"
#include "vmhost/guest/ssh_guest_control.h"
#include "vmhost/host_load.h"
#include "vmhost/libvirt_host.h"

namespace warren {

struct VmRuntimeOptions {
  std::string data_dir;
  std::string images_dir;  // default DATA/images
  // The VM hosts, NAME=URI (serve --host); the first is the default host.
  std::vector<std::string> hosts = {"local=qemu:///system"};
  // Remote hosts whose operator vouches for their isolation rules (serve --host-isolated).
  std::vector<std::string> isolated_hosts;
  // NAME=URI: how other hosts' daemons reach host NAME, for live moves onto it
  // (serve --host-peer-uri; lobby/host_flags.h).
  std::vector<std::string> peer_uris;
  std::string accel;  // "", "kvm" or "tcg": empty probes
  // How long a command waits for a running VM's control connection (a guest whose sshd is
  // gone, or one still booting) before it reports the VM unavailable.
  int guest_reach_timeout_s = 60;
  // How far the host's load may stretch the waits that give up on a guest (reach, keepalive,
  // a new VM's answer, cp's sync): serve --guest-slowdown-max, vmhost/host_load.h.
  double guest_slowdown_max = kDefaultMaxGuestSlowdown;
  int tb_cache_mib = kTcgTbCacheMib;  // serve --vm-tb-cache (domain_xml.h)
  // Memory held for the next VM start on this machine: serve --warm-memory
  // (vmhost/warm_memory.h, ParseWarmMemory).
  std::string warm_memory = "auto";
  std::string runner_path;  // the guest runner; empty: next to the warren binary
  // Ranges VMs may reach although the host's isolation rules close them (--vm-egress-allow).
  std::vector<Cidr> egress_allow;
  EgressFirewallOptions firewall;
  // The integrations proxy (--int-*): its limits and how often endpoints are kept up.
  IntegrationRuntimeOptions integrations;
};

class VmRuntime {
 public:
  // Starts libvirt (probing the accelerator, launching the daemons when none runs), installs
  // the host's isolation rules for QEMU's user (egress_firewall.h) before any VM starts,
  // makes the control key, opens guest control, meters VMs' usage from the host's state
  // changes (usage_meter.h), removes sandboxes that expired while warren was down,
  // reconciles the store with what libvirt reports (and again each time the host gets its
  // lost libvirt connection back: LibvirtHost::OnReconnected), and fills `services` (vms,
  // guests, images, control key). On failure `*fatal`
  // says whether serve must stop — the isolation rules could not be installed, and VMs must
  // not run without them — rather than serve a lobby without VMs.
  // With several hosts each is reconciled on its own (ReconcileScope), at start when it
  // answers and whenever it comes back; services.hosts is their HostSet.
  static Result<std::unique_ptr<VmRuntime>> Start(const VmRuntimeOptions& options,
                                                  Services& services, bool* fatal);
  // Stops the integrations watcher, closes the guest connections, then the proxy; then the
  // hosts (each local host's isolation chain goes only when no domain runs there). Logs
  // what it did.
  ~VmRuntime();

  // The guest control connections (also services.guests), for what only they can say.
  guest::SshGuestControl& ssh_guests() { return *guests_; }

 private:
  VmRuntime() = default;
  std::unique_ptr<VmHosts> hosts_;
  // Told of every state change of the host's VMs (VmHost::WatchStates) until the end.
  std::unique_ptr<UsageMeter> meter_;
  std::unique_ptr<guest::SshGuestControl> guests_;
  // Made before guests_ (which calls its sink) and torn down around it: see ~VmRuntime.
  std::unique_ptr<IntegrationRuntime> integrations_;
};

}  // namespace warren
