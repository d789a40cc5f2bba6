// The host's control key: the ed25519 key warren logs into its guests' control sshd with.
// The daemon keeps it in DATA/control_ed25519; its public line goes into each VM's seed as
// authorized_keys. Thread-compatible (call it once at startup).
#pragma once

#include <string>

#include "lobby/base/status.h"

namespace warren::guest {

// Loads the private key at `path`, or creates it (0600, written atomically, plus `path`.pub)
// when missing. Returns the public line ("ssh-ed25519 AAAA... warren-control") for the
// seed's authorized_keys. A key file readable by others, or not ed25519, is refused.
Result<std::string> EnsureControlKey(const std::string& path);

}  // namespace warren::guest
