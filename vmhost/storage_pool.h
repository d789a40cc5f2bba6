// A directory storage pool, opened or made: warren's files (each VM's directory, the disks
// directory) go through libvirt's storage API so the same code can drive a remote host.
// Thread-safe (libvirt connections are).
#pragma once

#include <string>

#include "vmhost/libvirt_handles.h"

namespace warren {

// The pool `name` over directory `path`, started if libvirt knows it but it is inactive, else
// created transient: the directory is the truth, the pool just a view of it that is made
// again whenever libvirt has forgotten it (a restarted daemon forgets transient pools).
// `build` creates the directory too.
Result<StoragePoolHandle> OpenDirPool(virConnectPtr conn, const std::string& name,
                                      const std::string& path, bool build);

}  // namespace warren
