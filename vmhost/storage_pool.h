// A directory storage pool, opened or made: warren's files (each VM's directory, the disks
// directory) go through libvirt's storage API so the same code can drive a remote host.
// Thread-safe (libvirt connections are).
#pragma once

#include <string>
#include <string_view>

#include "vmhost/libvirt_handles.h"

namespace warren {

// The name of a host-wide pool of `kind` ("disks", "vms", "images") over directory `path`:
// "<prefix><kind>-<8 hex digits hashing the path>", so two warrens (or tests) on one libvirtd
// never share one, and never an id (no VM id has a '-').
std::string PoolNameFor(std::string_view prefix, std::string_view kind, std::string_view path);

// The pool `name` over directory `path`, started if libvirt knows it but it is inactive, else
// created transient: the directory is the truth, the pool just a view of it that is made
// again whenever libvirt has forgotten it (a restarted daemon forgets transient pools).
// `build` creates the directory too. libvirt allows one pool per directory: when another
// pool (another prefix's, on a shared data directory) is over `path` already, that one.
Result<StoragePoolHandle> OpenDirPool(virConnectPtr conn, const std::string& name,
                                      const std::string& path, bool build);

}  // namespace warren
