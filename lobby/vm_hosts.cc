#include "lobby/vm_hosts.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "lobby/base/log.h"
#include "lobby/vm_runtime.h"
#include "vmhost/libvirt_uri.h"

namespace warren {

namespace {

// How long a dial waits for a move of its VM to end (VmHosts::DialControl): a live move's
// switchover takes about a second; this bounds a paused VM's whole move.
constexpr std::chrono::seconds kMoveWait{60};
// How often such a dial looks for the VM running on the move's target meanwhile.
constexpr std::chrono::milliseconds kMovePoll{50};

// The isolation rules for QEMU's user on local `host`, installed. Null (and Ok) for
// libvirt's test driver, which runs no QEMU.
Result<std::unique_ptr<EgressFirewall>> InstallFirewall(const VmRuntimeOptions& options,
                                                        LibvirtHost& host) {
  if (host.uri().rfind("test:", 0) == 0) return std::unique_ptr<EgressFirewall>();
  const QemuUser user = host.qemu_user();
  if (!user.known()) {
    return Unavailable("cannot tell which user QEMU runs as on " + host.uri() +
                       ": warren isolates VMs from the host by that user (nftables), so it "
                       "runs VMs only where libvirt's DAC driver names it (qemu:///system)");
  }
  EgressFirewallConfig config;
  config.qemu_uid = user.uid;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(options.data_dir, ec).lexically_normal();
  config.data_dir = dir.string();
  while (config.data_dir.size() > 1 && config.data_dir.back() == '/') config.data_dir.pop_back();
  config.allow = options.egress_allow;
  auto firewall = std::make_unique<EgressFirewall>(std::move(config), options.firewall);
  WARREN_RETURN_IF_ERROR(firewall->Apply());
  return firewall;
}

}  // namespace

Result<std::unique_ptr<VmHosts>> VmHosts::Start(const VmRuntimeOptions& options, bool* fatal) {
  *fatal = false;
  WARREN_ASSIGN_OR_RETURN(std::vector<HostFlag> flags,
                          ParseHostFlags(options.hosts, options.isolated_hosts, options.peer_uris));
  std::unique_ptr<VmHosts> hosts(new VmHosts());
  const std::string images_dir =
      options.images_dir.empty() ? options.data_dir + "/images" : options.images_dir;
  std::vector<HostMember> members;
  const bool reports_free_memory = HostReportsFreeMemory();
  WARREN_ASSIGN_OR_RETURN(const int64_t warm_bytes,
                          ParseWarmMemory(options.warm_memory, reports_free_memory));
  const bool any_local = std::any_of(flags.begin(), flags.end(),
                                     [](const HostFlag& f) { return !IsRemoteLibvirtUri(f.uri); });
  if (warm_bytes > 0 && any_local) {
    WarmMemoryOptions warm;
    warm.bytes = warm_bytes;
    hosts->warm_memory_ = std::make_unique<WarmMemory>(std::move(warm));
    LogInfo("warm memory: up to " + std::to_string(warm_bytes >> 20) +
            " MiB held for the next VM start on this machine (--warm-memory " +
            options.warm_memory +
            (reports_free_memory ? "; this machine returns free memory to a hypervisor)" : ")"));
  }
  for (HostFlag& flag : flags) {
    LibvirtHostOptions o;
    o.uri = flag.uri;
    o.peer_uri = flag.peer_uri;
    o.images_dir = images_dir;
    o.tb_cache_mib = options.tb_cache_mib;
    const bool remote = IsRemoteLibvirtUri(flag.uri);
    // A remote host keeps warren's files in its own /var/lib/warren (LibvirtHostOptions).
    if (!remote) {
      o.data_dir = options.data_dir;
      o.warm_memory = hosts->warm_memory_.get();
    }
    Host h;
    h.flag = flag;
    Result<std::unique_ptr<LibvirtHost>> started = StartLibvirtHost(o, options.accel);
    if (started.ok()) {
      h.libvirt = std::move(started).value();
    } else if (remote) {
      // Kept, unreachable: it connects (and is reconciled) once it answers.
      LogWarn("host " + flag.name + " (" + flag.uri +
              ") does not answer; its VMs show as unreachable until it does: " +
              started.status().ToString());
      h.libvirt = std::make_unique<LibvirtHost>(o);
    } else {
      return started.status().Annotate("host " + flag.name);
    }
    if (!remote) {
      // Before anything starts a VM there. This acts on every QEMU of the host that runs as
      // the same user, warren's or not.
      Result<std::unique_ptr<EgressFirewall>> firewall = InstallFirewall(options, *h.libvirt);
      if (!firewall.ok()) {
        *fatal = true;
        return firewall.status().Annotate("isolating the VMs of host " + flag.name);
      }
      h.firewall = std::move(firewall).value();
    }
    hosts->hosts_.push_back(std::move(h));
  }
  for (Host& h : hosts->hosts_) {
    HostMember m;
    m.name = h.flag.name;
    m.host = h.libvirt.get();
    m.accel = std::string(AccelName(h.libvirt->accel()));
    const bool isolated = h.firewall != nullptr || h.flag.declared_isolated;
    m.isolated = [isolated] { return isolated; };
    m.images = [host = h.libvirt.get()] { return host->Images(); };
    members.push_back(std::move(m));
  }
  WARREN_ASSIGN_OR_RETURN(hosts->set_, HostSet::Make(std::move(members)));
  return hosts;
}

VmHosts::~VmHosts() {
  for (Host& h : hosts_) {
    if (!h.firewall) continue;
    Result<int> running = h.libvirt->ActiveDomainCount();
    if (!running.ok()) {
      LogWarn("vm isolation: kept the chain " + h.firewall->chain() +
              " (could not count running domains: " + running.status().message() + ")");
    } else if (*running > 0) {
      LogInfo("vm isolation: kept the chain " + h.firewall->chain() + ": " +
              std::to_string(*running) + " domain(s) still run on " + h.libvirt->uri() +
              " and stay isolated");
    } else if (Status st = h.firewall->Remove(); !st.ok()) {
      LogWarn("vm isolation: " + st.ToString());
    } else {
      LogInfo("vm isolation: removed the chain " + h.firewall->chain() + " (no domain runs)");
    }
  }
}

Result<UniqueFd> VmHosts::DialControl(std::string_view id, std::string_view port) {
  auto named = [this](const std::string& name) -> Host* {
    for (Host& h : hosts_) {
      if (h.flag.name == name) return &h;
    }
    return nullptr;
  };
  const auto wait_until = std::chrono::steady_clock::now() + kMoveWait;
  for (;;) {
    WARREN_ASSIGN_OR_RETURN(std::string name, set_->HostOf(id));
    Host* host = named(name);
    if (host == nullptr) return NotFound("no host named " + name);
    // Only a running VM has a control port; saying so at once beats retrying a dead socket
    // for the whole reach timeout.
    WARREN_ASSIGN_OR_RETURN(VmState state, host->libvirt->State(id));
    if (state == VmState::kRunning) return host->libvirt->DialControl(id, port);
    // Stopped or paused at a move's switchover: it runs on the target from its resume on,
    // while the move still tidies up here (its record still names this host).
    const std::string to = set_->MovingTo(id);
    if (to.empty() || std::chrono::steady_clock::now() >= wait_until) {
      return Conflict("the VM is " + std::string(VmStateName(state)) +
                      "; start or resume it first");
    }
    if (Host* target = named(to); target != nullptr) {
      Result<VmState> there = target->libvirt->State(id);
      if (there.ok() && *there == VmState::kRunning) {
        return target->libvirt->DialControl(id, port);
      }
    }
    set_->AwaitMove(id, std::min(wait_until, std::chrono::steady_clock::now() + kMovePoll));
  }
}

}  // namespace warren
