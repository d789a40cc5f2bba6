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
  if (hosts_) {
    for (VmHosts::Host& h : hosts_->hosts()) h.libvirt->OnReconnected(nullptr);
    if (meter_) {
      if (Status st = hosts_->set().WatchStates(nullptr); !st.ok()) {
        LogWarn("usage meter: " + st.ToString());
      }
    }
  }
  // The watcher calls the guests and the guests call the proxy's sink: in that order.
  if (integrations_) integrations_->Stop();
  guests_.reset();
  integrations_.reset();
  hosts_.reset();  // each local host's isolation chain, when nothing runs there
}

Result<std::unique_ptr<VmRuntime>> VmRuntime::Start(const VmRuntimeOptions& options,
                                                    Services& services, bool* fatal) {
  *fatal = false;
  std::unique_ptr<VmRuntime> rt(new VmRuntime());
  const std::string images_dir =
      options.images_dir.empty() ? options.data_dir + "/images" : options.images_dir;

  // Each local host's isolation rules are in place before anything starts a VM there.
  WARREN_ASSIGN_OR_RETURN(rt->hosts_, VmHosts::Start(options, fatal));
  HostSet& set = rt->hosts_->set();
  // Before anything starts or stops a VM, so no transition goes unmetered.
  rt->meter_ = std::make_unique<UsageMeter>(*services.store, *services.clock);
  WARREN_RETURN_IF_ERROR(set.WatchStates(
      [meter = rt->meter_.get()](const VmStateEvent& e) { meter->OnStateChange(e); }));

  WARREN_ASSIGN_OR_RETURN(std::string control_key,
                          guest::EnsureControlKey(options.data_dir + "/control_ed25519"));

  guest::SshGuestControlOptions guest_options;
  guest_options.dial = [hosts = rt->hosts_.get()](std::string_view id) {
    return hosts->DialControl(id);
  };
  guest_options.dial_identity = [hosts = rt->hosts_.get()](std::string_view id) {
    return hosts->DialControl(id, kIdentityChannelName);
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
  rt->integrations_->Start(rt->guests_.get(), &set);

  services.vms = &set;
  services.hosts = &set;
  services.guests = rt->guests_.get();
  // Sandboxes whose time ran out while warren was down go first: reconcile must not start
  // them again.
  for (const std::string& name : ExpireSandboxes(services, services.clock->NowUnix())) {
    LogInfo("reconcile: sandbox " + LogQuote(name) + " expired while warren was down; removed");
  }
  // Each host on its own: reconcile logs what it did; a failed action is reported, not
  // fatal: the lobby serves. A host that does not answer is reconciled when it does.
  const bool several = set.names().size() > 1;
  for (VmHosts::Host& h : rt->hosts_->hosts()) {
    ReconcileScope scope{several ? h.flag.name : "", set.default_host()};
    // A domain whose record names another host: is it still there (a migration cut short)?
    scope.holds = [&set](const std::string& host_name, const std::string& id) -> Result<bool> {
      VmHost* member = set.member(host_name);
      if (member == nullptr) return NotFound("no host named " + host_name);
      Result<VmInfo> info = member->Inspect(id);
      if (info.ok()) return true;
      if (info.status().code() == Code::kNotFound) return false;
      return info.status();
    };
    if (!several || h.libvirt->connected() || h.libvirt->Capacity().ok()) {
      Status reconciled = Reconcile(*services.store, *h.libvirt, rt->guests_.get(), *services.clock,
                                    nullptr, scope);
      if (!reconciled.ok()) LogWarn("reconcile: " + reconciled.ToString());
    } else {
      LogWarn("reconcile: host " + h.flag.name + " does not answer; reconciled when it does");
    }
    // The same reconcile after the host lost libvirt and got it back (libvirtd killed or
    // restarted, a remote host back): what changed meanwhile, and what commands cut off by
    // the loss left (a domain of a `new` that failed half-way), is put right. It runs before
    // any other caller may use the host again, so no command changes the host beside it; the
    // host then reports every VM's state to the usage meter.
    h.libvirt->OnReconnected([store = services.store, host = h.libvirt.get(),
                              guests = rt->guests_.get(), clock = services.clock, scope] {
      LogInfo("reconcile: after reconnecting to libvirt" +
              (scope.host.empty() ? std::string() : " on host " + scope.host));
      Status st = Reconcile(*store, *host, guests, *clock, nullptr, scope);
      if (!st.ok()) LogWarn("reconcile: " + st.ToString());
    });
  }
  // What ran while warren was down is counted up to now; from here the events keep it.
  if (Status st = rt->meter_->Resync(set); !st.ok()) LogWarn("usage meter: " + st.ToString());

  services.images = DirectoryImageCatalog(images_dir);
  services.control_authorized_key = control_key;
  LogInfo("vms on " + set.uri() + ", images in " + images_dir);
  return rt;
}

}  // namespace warren
