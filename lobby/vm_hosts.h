// VmHosts: the VM hosts of `serve --host NAME=URI…`, started — one LibvirtHost per host, the
// isolation rules (egress_firewall.h) installed on each host that is this machine, and the
// HostSet (vmhost/host_set.h) the interpreter sees them through. A remote host that does not
// answer at start is kept all the same (unreachable: its LibvirtHost connects once it does),
// so one host down never keeps the lobby from serving the others. Part of VmRuntime; Start
// and the destructor run on the main thread, the rest on any.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"
#include "lobby/host_flags.h"
#include "vmhost/egress_firewall.h"
#include "vmhost/host_set.h"
#include "vmhost/libvirt_host.h"
#include "vmhost/warm_memory.h"

namespace warren {

struct VmRuntimeOptions;

class VmHosts {
 public:
  // Starts every host (see above). On failure `*fatal` says whether serve must stop: a local
  // host's isolation rules could not be installed, and VMs must not run without them.
  static Result<std::unique_ptr<VmHosts>> Start(const VmRuntimeOptions& options, bool* fatal);
  // Removes each local host's isolation chain, but only when no domain at all runs on it:
  // VMs outlive warren on purpose (libvirtd_launcher.h) and stay isolated meanwhile.
  ~VmHosts();

  HostSet& set() { return *set_; }
  struct Host {
    HostFlag flag;
    std::unique_ptr<LibvirtHost> libvirt;
    std::unique_ptr<EgressFirewall> firewall;  // a local host's; null for a remote one
  };
  std::vector<Host>& hosts() { return hosts_; }
  // The control connection of VM `id` (or its virtio-serial port `port`), on whichever host
  // runs it: Conflict unless it runs. A VM not running because it is being moved
  // (HostSet::MovingTo) is waited for, up to kMoveWait, and dialled on the target as soon as
  // it runs there.
  Result<UniqueFd> DialControl(std::string_view id, std::string_view port = kControlChannelName);

 private:
  VmHosts() = default;
  // Memory held for the next VM start on this machine, shared by its local hosts; null when
  // none is held (serve --warm-memory 0). Declared first: it outlives the hosts that use it.
  std::unique_ptr<WarmMemory> warm_memory_;
  std::vector<Host> hosts_;
  std::unique_ptr<HostSet> set_;
};

}  // namespace warren
