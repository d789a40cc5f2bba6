// A sandbox's end: at its expiry warren destroys it and its disk, as `rm` would, and says so
// in the audit log (cmd=expire, surface=warren). The binary calls ExpireSandboxes every
// second; reconcile calls it at start, so a sandbox that expired while warren was down goes
// then. Its usage stops at its expiry, not at the moment warren got round to it. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

struct Services;

// Removes every sandbox whose expires_at is at or before `now` (Unix seconds), the earliest
// first; returns the names removed. A sandbox whose removal fails stays for the next call
// (and is logged); the others go on.
std::vector<std::string> ExpireSandboxes(Services& services, int64_t now);

}  // namespace warren
