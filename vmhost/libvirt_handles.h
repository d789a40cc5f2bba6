// RAII owners for libvirt's C handles and the one place a libvirt error becomes a Status.
// Handles are plain unique_ptrs: move-only, not shareable; a libvirt object itself is
// thread-safe, so two threads may each hold their own handle to the same domain. Every
// function here is thread-safe (libvirt keeps the last error per thread).
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

struct ConnectDeleter {
  void operator()(virConnectPtr p) const { virConnectClose(p); }
};
struct DomainDeleter {
  void operator()(virDomainPtr p) const { virDomainFree(p); }
};
struct StoragePoolDeleter {
  void operator()(virStoragePoolPtr p) const { virStoragePoolFree(p); }
};
struct StorageVolDeleter {
  void operator()(virStorageVolPtr p) const { virStorageVolFree(p); }
};
struct StreamDeleter {
  // A stream still open when its owner goes away was not finished: abort it so the
  // daemon drops its side too. virStreamAbort fails harmlessly on a finished stream.
  void operator()(virStreamPtr p) const {
    virStreamAbort(p);
    virStreamFree(p);
  }
};
// Strings libvirt hands over (XML, names) are malloc'd and ours to free.
struct LibvirtFree {
  void operator()(char* p) const { free(p); }  // NOLINT: libvirt allocates with malloc
};

using ConnectHandle = std::unique_ptr<virConnect, ConnectDeleter>;
using DomainHandle = std::unique_ptr<virDomain, DomainDeleter>;
using StoragePoolHandle = std::unique_ptr<virStoragePool, StoragePoolDeleter>;
using StorageVolHandle = std::unique_ptr<virStorageVol, StorageVolDeleter>;
using StreamHandle = std::unique_ptr<virStream, StreamDeleter>;
using LibvirtString = std::unique_ptr<char, LibvirtFree>;

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

// Opens `uri`. Unavailable when no daemon answers.
Result<ConnectHandle> OpenLibvirt(const std::string& uri);

}  // namespace warren
