// LibvirtHost::WatchStates: libvirt's lifecycle events on the host's shared connection,
// through a VmStateDelivery (vm_state_delivery.h), re-registered after a reconnect.
#include <string>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/libvirt_host.h"

namespace warren {

Status LibvirtHost::WatchStates(VmStateListener listener) {
  VmStateDelivery* delivery = nullptr;
  {
    std::lock_guard lock(watch_mu_);
    if (!delivery_) {
      if (!listener) return Status::Ok();  // nothing to stop
      auto made = std::make_unique<VmStateDelivery>(
          [this](const std::atomic<bool>&) { return ReportAllStates(); },
          VmStateDelivery::kDefaultMaxQueued,
          [this](const VmStateEvent& e) { return AdmitEvent(e); });
      auto sink = std::make_shared<LifecycleSink>(
          options_.domain_prefix, made.get(),
          [this](const std::string& why) { reconnector_->Lost(why); });
      delivery_ = std::move(made);
      sink_ = std::move(sink);
    }
    delivery = delivery_.get();
  }
  // Not under watch_mu_: this waits for a listener call in progress, which may itself call
  // into this host. Set before registering, so no event of the new registration finds the
  // delivery without a listener.
  const bool watching = static_cast<bool>(listener);
  delivery->SetListener(std::move(listener));
  if (!watching) return Status::Ok();
  // Known before the first event, so a VM removed before the daemon was asked about it is
  // still reported (this host's own new VMs are noted as they are defined).
  Result<std::vector<VmInfo>> vms = List();
  if (vms.ok()) {
    std::lock_guard lock(own_mu_);
    for (const VmInfo& vm : *vms) own_ids_.insert(vm.id);
  } else {
    LogWarn("vmhost: listing vms to watch: " + vms.status().ToString());
  }
  // Registered before this returns: every change from now on is reported.
  Result<Conn> conn = Connect();
  Status registered = conn.ok() ? WatchConnection(*conn) : conn.status();
  if (!registered.ok()) {
    delivery->SetListener(nullptr);
    return registered.Annotate("watching vm states");
  }
  return Status::Ok();
}

Status LibvirtHost::WatchConnection(const Conn& conn) {
  std::lock_guard lock(watch_mu_);
  if (!sink_) return Internal("vm states are not being watched");
  if (registration_ && registration_->conn() == conn.get()) return Status::Ok();
  registration_.reset();  // the old connection's, dead or replaced
  WARREN_ASSIGN_OR_RETURN(registration_, LifecycleRegistration::Register(conn, sink_));
  return Status::Ok();
}

Result<std::vector<VmStateEvent>> LibvirtHost::ReportAllStates() {
  // Register on the (new) connection before listing: a change after the list is an event.
  WARREN_ASSIGN_OR_RETURN(Conn conn, Connect());
  WARREN_RETURN_IF_ERROR(WatchConnection(conn));
  WARREN_ASSIGN_OR_RETURN(std::vector<VmInfo> vms, List());
  std::vector<VmStateEvent> out;
  out.reserve(vms.size());
  std::lock_guard lock(own_mu_);
  for (VmInfo& vm : vms) {
    own_ids_.insert(vm.id);
    out.push_back({std::move(vm.id), vm.state});
  }
  LogInfo("vmhost: full report: the state of " + std::to_string(out.size()) + " vms");
  return out;
}

bool LibvirtHost::AdmitEvent(const VmStateEvent& event) {
  {
    std::lock_guard lock(own_mu_);
    if (own_ids_.count(event.id) != 0) return true;
  }
  // A domain first seen now: ask the daemon once whose it is. One already gone again was
  // never reported while it existed, so its end is not either.
  Result<OpenVm> vm = Open(event.id);
  if (!vm.ok()) return false;
  Result<bool> ours = HoldsDomain(vm->dom.get());
  if (!ours.ok() || !*ours) return false;
  std::lock_guard lock(own_mu_);
  own_ids_.insert(event.id);
  return true;
}

void LibvirtHost::NoteOwnDomain(std::string_view id) {
  std::lock_guard lock(own_mu_);
  own_ids_.insert(std::string(id));
}

void LibvirtHost::ReportState(std::string_view id, VmState state) {
  std::lock_guard lock(watch_mu_);
  if (delivery_) delivery_->Push({std::string(id), state});
}

}  // namespace warren
