#include "lobby/vm_runtime.h"

#include <chrono>
#include <filesystem>

#include "lobby/base/log.h"
#include "lobby/base/unix_socket.h"
#include "lobby/commands/image_catalog.h"
#include "lobby/commands/reconcile.h"
#include "lobby/commands/sandbox_expiry.h"
#include "vmhost/guest/control_key.h"

namespace warren {

VmRuntime::~VmRuntime() {
  // No reconcile after a reconnection from here on (waits for one under way).
  if (host_) host_->OnReconnected(nullptr);
  if (host_ && meter_) {
    if (Status st = host_->WatchStates(nullptr); !st.ok()) LogWarn("usage meter: " + st.ToString());
  }
  // The watcher calls the guests and the guests call the proxy's sink: in that order.
  if (integrations_) integrations_->Stop();
  guests_.reset();
  integrations_.reset();
  if (!firewall_ || !host_) return;
  Result<int> running = host_->ActiveDomainCount();
  if (!running.ok()) {
    LogWarn("vm isolation: kept the chain " + firewall_->chain() +
            " (could not count running domains: " + running.status().message() + ")");
  } else if (*running > 0) {
    LogInfo("vm isolation: kept the chain " + firewall_->chain() + ": " + std::to_string(*running) +
            " domain(s) still run on " + host_->uri() + " and stay isolated");
  } else if (Status st = firewall_->Remove(); !st.ok()) {
    LogWarn("vm isolation: " + st.ToString());
  } else {
    LogInfo("vm isolation: removed the chain " + firewall_->chain() + " (no domain runs)");
  }
}

namespace {

// The isolation rules for QEMU's user on `host`, installed. Null (and Ok) for libvirt's
// test driver, which runs no QEMU.
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

Result<std::unique_ptr<VmRuntime>> VmRuntime::Start(const VmRuntimeOptions& options,
                                                    Services& services, bool* fatal) {
  *fatal = false;
  std::unique_ptr<VmRuntime> rt(new VmRuntime());
  const std::string images_dir =
      options.images_dir.empty() ? options.data_dir + "/images" : options.images_dir;

  LibvirtHostOptions host_options;
  host_options.uri = options.libvirt_uri;
  host_options.data_dir = options.data_dir;
  host_options.images_dir = images_dir;
  host_options.tb_cache_mib = options.tb_cache_mib;
  WARREN_ASSIGN_OR_RETURN(rt->host_, StartLibvirtHost(host_options, options.accel));
  // Before anything starts or stops a VM, so no transition goes unmetered.
  rt->meter_ = std::make_unique<UsageMeter>(*services.store, *services.clock);
  WARREN_RETURN_IF_ERROR(rt->host_->WatchStates(
      [meter = rt->meter_.get()](const VmStateEvent& e) { meter->OnStateChange(e); }));
  // Before reconcile starts any VM. This acts on every QEMU of the host that runs as the
  // same user, warren's or not.
  Result<std::unique_ptr<EgressFirewall>> firewall = InstallFirewall(options, *rt->host_);
  if (!firewall.ok()) {
    *fatal = true;
    return firewall.status().Annotate("isolating VMs from the host");
  }
  rt->firewall_ = std::move(firewall).value();

  WARREN_ASSIGN_OR_RETURN(std::string control_key,
                          guest::EnsureControlKey(options.data_dir + "/control_ed25519"));

  guest::SshGuestControlOptions guest_options;
  LibvirtHost* host = rt->host_.get();
  // Only a running VM has a control port; saying so at once beats retrying a dead socket
  // for the whole reach timeout.
  guest_options.dial = [host](std::string_view id) -> Result<UniqueFd> {
    WARREN_ASSIGN_OR_RETURN(VmInfo info, host->Inspect(id));
    if (info.state != VmState::kRunning) {
      return Conflict("the VM is " + std::string(VmStateName(info.state)) +
                      "; start or resume it first");
    }
    return DialUnixSocket(host->VmDir(id) + "/control.sock");
  };
  guest_options.key_path = options.data_dir + "/control_ed25519";
  guest_options.runner_path = options.runner_path;
  guest_options.reach_timeout = std::chrono::seconds(options.guest_reach_timeout_s);
  const double slowdown_max = options.guest_slowdown_max;
  auto slowdown = [slowdown_max] { return GuestSlowdown(slowdown_max); };
  guest_options.slowdown = slowdown;
  services.guest_slowdown = slowdown;
  // Integrations reach every VM that may use them over its control connection.
  WARREN_ASSIGN_OR_RETURN(rt->integrations_, IntegrationRuntime::Create(
                                                 options.integrations, options.data_dir, services));
  guest_options.inbound = rt->integrations_->sink();
  guest_options.endpoint = rt->integrations_->endpoint();
  WARREN_ASSIGN_OR_RETURN(rt->guests_, guest::SshGuestControl::Create(guest_options));
  rt->integrations_->Start(rt->guests_.get(), rt->host_.get());

  services.vms = rt->host_.get();
  services.guests = rt->guests_.get();
  // Sandboxes whose time ran out while warren was down go first: reconcile must not start
  // them again.
  for (const std::string& name : ExpireSandboxes(services, services.clock->NowUnix())) {
    LogInfo("reconcile: sandbox " + LogQuote(name) + " expired while warren was down; removed");
  }
  // Reconcile logs what it did; a failed action is reported, not fatal: the lobby serves.
  Status reconciled = Reconcile(*services.store, *rt->host_, rt->guests_.get(), *services.clock);
  if (!reconciled.ok()) LogWarn("reconcile: " + reconciled.ToString());
  // What ran while warren was down is counted up to now; from here the events keep it.
  if (Status st = rt->meter_->Resync(*rt->host_); !st.ok())
    LogWarn("usage meter: " + st.ToString());
  // The same reconcile after the host lost libvirt and got it back (libvirtd killed or
  // restarted): what changed meanwhile, and what commands cut off by the loss left (a
  // domain of a `new` that failed half-way), is put right. It runs before any other caller
  // may use the host again, so no command changes the host beside it; the host then reports
  // every VM's state to the usage meter.
  rt->host_->OnReconnected([store = services.store, host = rt->host_.get(),
                            guests = rt->guests_.get(), clock = services.clock] {
    LogInfo("reconcile: after reconnecting to libvirt");
    Status st = Reconcile(*store, *host, guests, *clock);
    if (!st.ok()) LogWarn("reconcile: " + st.ToString());
  });

  services.images = DirectoryImageCatalog(images_dir);
  services.control_authorized_key = control_key;
  LogInfo("vms on " + host_options.uri + ", images in " + images_dir);
  return rt;
}

}  // namespace warren
