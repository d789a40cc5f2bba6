// The host's room for sandboxes, checked for a command: what every sandbox meant to run
// reserves now (from the store) against what the host has (VmHost::Capacity) by the rule of
// sandbox.h. `new --sandbox` checks it before the record is written and `start` before a
// stopped sandbox runs again; both hold a SandboxRoomLock until their record is written.
#pragma once

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace warren {

// Ok for an ordinary VM; for a sandbox, LimitExceeded with the figures when the host's room
// (less what the other sandboxes reserve) does not hold `planned`'s vCPUs and memory.
// Unavailable when this server runs no VMs or the host cannot say what it has.
Status CheckSandboxRoomFor(CommandContext& ctx, const VmRecord& planned);

}  // namespace warren
