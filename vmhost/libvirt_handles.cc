#include "vmhost/libvirt_handles.h"

#include <mutex>

#include "vmhost/libvirt_events.h"

namespace warren {
namespace {

void IgnoreLibvirtError(void* /*user_data*/, virErrorPtr /*error*/) {}

}  // namespace

void SilenceLibvirtErrors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // virInitialize must come first when threads may call libvirt concurrently.
    virInitialize();
    virSetErrorFunc(nullptr, IgnoreLibvirtError);
  });
}

Code LibvirtErrorCode(int vir_error_number) {
  switch (vir_error_number) {
    case VIR_ERR_NO_DOMAIN:
    case VIR_ERR_NO_STORAGE_POOL:
    case VIR_ERR_NO_STORAGE_VOL:
    case VIR_ERR_NO_DOMAIN_METADATA:
      return Code::kNotFound;
    case VIR_ERR_OPERATION_INVALID:
    case VIR_ERR_DOM_EXIST:
    case VIR_ERR_STORAGE_VOL_EXIST:
      return Code::kConflict;
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_RPC:
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_NO_SERVER:
      return Code::kUnavailable;
    case VIR_ERR_OPERATION_TIMEOUT:
      return Code::kTimeout;
    default:
      return Code::kInternal;
  }
}

Status LibvirtError(std::string_view what) {
  virErrorPtr err = virGetLastError();
  if (err == nullptr || err->code == VIR_ERR_OK) {
    return Internal(std::string(what) + ": libvirt failed without an error");
  }
  std::string message = std::string(what) + ": " + (err->message ? err->message : "no message");
  Code code = LibvirtErrorCode(err->code);
  // VIR_ERR_SYSTEM_ERROR is also raised for local I/O failures (a missing file, a refused
  // chown); only count it as "unavailable" when it came from the remote transport.
  if (err->code == VIR_ERR_SYSTEM_ERROR && err->domain != VIR_FROM_REMOTE &&
      err->domain != VIR_FROM_RPC) {
    code = Code::kInternal;
  }
  // A call cut off by the daemon's death says so plainly (the host reconnects meanwhile).
  if (code == Code::kUnavailable && err->code != VIR_ERR_AUTH_FAILED &&
      err->code != VIR_ERR_AUTH_UNAVAILABLE) {
    message =
        "VM host unavailable (the connection to libvirt failed; warren reconnects): " + message;
  }
  virResetLastError();
  return Status(code, std::move(message));
}

Result<ConnectHandle> OpenLibvirt(const std::string& uri) {
  SilenceLibvirtErrors();
  // Before the open: only then does the connection get events (libvirt_events.h).
  StartLibvirtEventLoop();
  ConnectHandle conn(virConnectOpen(uri.c_str()));
  if (!conn) {
    virErrorPtr err = virGetLastError();
    std::string why = err != nullptr && err->message != nullptr ? err->message : "no message";
    virResetLastError();
    // A failed open is always "the hypervisor is not reachable" to our callers.
    return Unavailable("connecting to " + uri + ": " + why);
  }
  // A daemon that stops answering (hung, or a remote host whose link dropped without a
  // word) closes the connection after about 30 s instead of never: the close callback then
  // makes WatchStates reconnect and report every state, and later calls reopen. libvirtd
  // answers pings on its own event loop thread, so a long API call (a capability probe
  // stalling a start ~48 s, libvirtd_launcher.h) does not trip it. Drivers without a
  // daemon (test:///) refuse keepalive: nothing to watch there.
  if (virConnectSetKeepAlive(conn.get(), 5, 6) < 0) virResetLastError();
  return conn;
}

Result<std::vector<DomainHandle>> ListDomains(virConnectPtr conn, std::string_view prefix) {
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn, &doms, 0);
  if (n < 0) return LibvirtError("listing vms");
  std::vector<DomainHandle> all;
  for (int i = 0; i < n; ++i) all.emplace_back(doms[i]);
  free(doms);  // NOLINT: allocated by libvirt
  std::vector<DomainHandle> out;
  for (DomainHandle& dom : all) {
    const char* name = virDomainGetName(dom.get());
    if (name == nullptr) continue;
    const std::string_view sv(name);
    if (sv.size() > prefix.size() && sv.substr(0, prefix.size()) == prefix) {
      out.push_back(std::move(dom));
    }
  }
  return out;
}

}  // namespace warren
