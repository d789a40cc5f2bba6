// Connecting to a unix stream socket without waiting: what reaching a VM's control port on
// this machine is (QEMU's chardev socket, vmhost/domain_xml.cc). Thread-safe.
#pragma once

#include <string>

#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"

namespace warren {

// A connected, non-blocking, close-on-exec socket to `path`. The connect itself never waits:
// QEMU takes one client at a time, and a connect to its socket while another client holds it
// would wait in the listen backlog for as long as that client stays; that is Unavailable
// ("... is busy"), as is any other refusal (no such socket, nobody listening). Unavailable
// for a path that does not fit a sockaddr_un; Internal when no socket can be made.
Result<UniqueFd> DialUnixSocket(const std::string& path);

}  // namespace warren
