#include "vmhost/libvirt_events.h"

#include <pthread.h>

#include <chrono>
#include <thread>

#include "lobby/base/log.h"
#include "vmhost/libvirt_handles.h"

namespace warren {
namespace {

void RunEventLoop() {
  pthread_setname_np(pthread_self(), "libvirt-events");
  for (;;) {
    if (virEventRunDefaultImpl() < 0) {
      // Not expected (the default loop fails only on a broken poll); never spin on it.
      LogWarn("vmhost: " + LibvirtError("running libvirt's event loop").ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

// libvirt's C callbacks; the opaque pointer is a heap copy of the sink's shared pointer,
// freed by libvirt (DeleteSinkRef) once the callback can no longer run: a callback still in
// progress when the host deregisters keeps its sink alive until it returns.
void OnLifecycleEvent(virConnectPtr /*conn*/, virDomainPtr dom, int event, int detail,
                      void* opaque) {
  (*static_cast<std::shared_ptr<LifecycleSink>*>(opaque))->OnLifecycle(dom, event, detail);
}

void DeleteSinkRef(void* opaque) { delete static_cast<std::shared_ptr<LifecycleSink>*>(opaque); }

// libvirt calls and unregisters the close callback under one lock, so after
// virConnectUnregisterCloseCallback returns it runs no more: the registration's own
// reference keeps the sink alive that long.
void OnConnectionClosed(virConnectPtr /*conn*/, int reason, void* opaque) {
  static_cast<LifecycleSink*>(opaque)->OnClose(reason);
}

}  // namespace

void StartLibvirtEventLoop() {
  static std::once_flag once;
  std::call_once(once, [] {
    SilenceLibvirtErrors();  // virInitialize comes first
    if (virEventRegisterDefaultImpl() < 0) {
      LogError("vmhost: " + LibvirtError("registering libvirt's event loop").ToString() +
               "; vm state changes will not be reported");
      return;
    }
    // Runs until the process ends: see the header (every connection needs it).
    std::thread(RunEventLoop).detach();
  });
}

std::optional<VmState> StateAfterLifecycleEvent(int event, int detail) {
  switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
      return VmState::kRunning;
    case VIR_DOMAIN_EVENT_SUSPENDED:
    case VIR_DOMAIN_EVENT_PMSUSPENDED:
      return VmState::kPaused;
    case VIR_DOMAIN_EVENT_STOPPED:
      // Moved to another host (MigrateTo): the VM runs on there, it did not stop.
      if (detail == VIR_DOMAIN_EVENT_STOPPED_MIGRATED) return std::nullopt;
      return detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED ? VmState::kCrashed : VmState::kStopped;
    case VIR_DOMAIN_EVENT_CRASHED:
      // A panic ends the domain (on_crash destroy, domain_xml.cc); a loaded crash kernel
      // keeps it running.
      if (detail == VIR_DOMAIN_EVENT_CRASHED_CRASHLOADED) return std::nullopt;
      return VmState::kCrashed;
    case VIR_DOMAIN_EVENT_UNDEFINED:
      return VmState::kStopped;
    case VIR_DOMAIN_EVENT_DEFINED:
    case VIR_DOMAIN_EVENT_SHUTDOWN:
    default:
      return std::nullopt;
  }
}

void LifecycleSink::OnLifecycle(virDomainPtr dom, int event, int detail) {
  std::optional<VmState> state = StateAfterLifecycleEvent(event, detail);
  if (!state) return;
  const char* name = virDomainGetName(dom);  // local: no call to the daemon
  if (name == nullptr) return;
  const std::string_view sv(name);
  if (sv.size() <= prefix_.size() || sv.substr(0, prefix_.size()) != prefix_) return;
  std::lock_guard lock(mu_);
  if (delivery_ != nullptr) delivery_->Push({std::string(sv.substr(prefix_.size())), *state});
}

namespace {

std::string CloseReason(int reason) {
  switch (reason) {
    case VIR_CONNECT_CLOSE_REASON_ERROR:
      return "the daemon's socket failed";
    case VIR_CONNECT_CLOSE_REASON_EOF:
      return "the daemon closed the connection";
    case VIR_CONNECT_CLOSE_REASON_KEEPALIVE:
      return "the daemon stopped answering keepalives";
    default:
      return "closed, reason " + std::to_string(reason);
  }
}

}  // namespace

void LifecycleSink::OnClose(int reason) {
  if (reason == VIR_CONNECT_CLOSE_REASON_CLIENT) return;  // we closed it ourselves
  std::lock_guard lock(mu_);
  if (on_lost_) {
    on_lost_(CloseReason(reason));  // logs, reconnects, then reports every vm's state
    return;
  }
  LogWarn("vmhost: lost the libvirt connection (" + CloseReason(reason) +
          "); reconnecting to report every vm's state");
  if (delivery_ != nullptr) delivery_->Resync();
}

void LifecycleSink::Detach() {
  std::lock_guard lock(mu_);
  delivery_ = nullptr;
  on_lost_ = nullptr;
}

Result<std::unique_ptr<LifecycleRegistration>> LifecycleRegistration::Register(
    std::shared_ptr<virConnect> conn, std::shared_ptr<LifecycleSink> sink) {
  std::unique_ptr<LifecycleRegistration> reg(new LifecycleRegistration(conn, sink));
  auto* ref = new std::shared_ptr<LifecycleSink>(sink);
  reg->lifecycle_id_ = virConnectDomainEventRegisterAny(
      conn.get(), nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
      VIR_DOMAIN_EVENT_CALLBACK(OnLifecycleEvent), ref, DeleteSinkRef);
  if (reg->lifecycle_id_ < 0) {
    delete ref;  // libvirt frees it only once registered
    return LibvirtError("watching vm state changes");
  }
  // Drivers without a connection to lose (the in-process test driver) accept this and never
  // call it.
  if (virConnectRegisterCloseCallback(conn.get(), OnConnectionClosed, sink.get(), nullptr) < 0) {
    return LibvirtError("watching the libvirt connection");  // the destructor deregisters
  }
  reg->close_registered_ = true;
  return reg;
}

LifecycleRegistration::~LifecycleRegistration() {
  if (close_registered_ && virConnectUnregisterCloseCallback(conn_.get(), OnConnectionClosed) < 0) {
    virResetLastError();
  }
  if (lifecycle_id_ >= 0 && virConnectDomainEventDeregisterAny(conn_.get(), lifecycle_id_) < 0) {
    virResetLastError();  // a dead connection has dropped it anyway
  }
}

}  // namespace warren
