// RAII owners for libvirt's C handles (lobby/base/unique_handle.h) and the one place a
// libvirt error becomes a Status. Handles are move-only, not shareable; a libvirt object
// itself is thread-safe, so two threads may each hold their own handle to the same domain.
// Every function here is thread-safe (libvirt keeps the last error per thread).
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/unique_handle.h"

namespace warren {

// A stream still open when its owner goes away was not finished: abort it so the daemon
// drops its side too. virStreamAbort fails harmlessly on a finished stream.
inline void AbortAndFreeStream(virStreamPtr p) {
  virStreamAbort(p);
  virStreamFree(p);
}
// Strings libvirt hands over (XML, names) are malloc'd and ours to free.
inline void FreeLibvirtString(char* p) { free(p); }  // NOLINT: libvirt allocates with malloc

using ConnectHandle = UniqueHandle<virConnectPtr, virConnectClose>;
using DomainHandle = UniqueHandle<virDomainPtr, virDomainFree>;
using StoragePoolHandle = UniqueHandle<virStoragePoolPtr, virStoragePoolFree>;
using StorageVolHandle = UniqueHandle<virStorageVolPtr, virStorageVolFree>;
using StreamHandle = UniqueHandle<virStreamPtr, AbortAndFreeStream>;
using LibvirtString = UniqueHandle<char*, FreeLibvirtString>;

// Silences libvirt's default error printer (it writes every error to stderr, even ones we
// handle) for the whole process. Idempotent; called by everything that opens a connection.
void SilenceLibvirtErrors();

// The calling thread's last libvirt error as a Status, prefixed with `what`:
//   VIR_ERR_NO_DOMAIN (and missing pools/volumes) -> NotFound
//   VIR_ERR_OPERATION_INVALID (wrong domain state) -> Conflict
//   VIR_ERR_DOM_EXIST / VIR_ERR_STORAGE_VOL_EXIST  -> Conflict
//   connection and RPC failures                    -> Unavailable
//   VIR_ERR_OPERATION_TIMEOUT                      -> Timeout
//   anything else                                  -> Internal
// Resets the thread's error so a later call cannot report a stale one.
Status LibvirtError(std::string_view what);

// The same mapping for a given error code, for tests.
Code LibvirtErrorCode(int vir_error_number);

// Opens `uri`, after starting the process's libvirt event loop (libvirt_events.h), with
// keepalive where the driver has a daemon to ping. Unavailable when no daemon answers.
Result<ConnectHandle> OpenLibvirt(const std::string& uri);

// Every domain whose name is `prefix` followed by something (a host's VMs, or a test's).
Result<std::vector<DomainHandle>> ListDomains(virConnectPtr conn, std::string_view prefix);

}  // namespace warren
