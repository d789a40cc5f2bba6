// The steps `new` and `cp` share when they make a VM: write its record first (phase
// "creating", with a made-up free name when none was given), wait until the booted guest
// runs a command, and undo everything when a step fails. Stateless functions; thread-safe.
#pragma once

#include <string>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace warren {

class VmHost;
class GuestControl;

// Writes `vm` (phase creating) with a fresh id, making up a free name when vm.name is empty.
// Conflict when the asked-for name is taken.
Status RecordNewVm(CommandContext& ctx, VmRecord& vm);

// Polls the guest with `true` until it answers, the deadline (services.ready_timeout_ms)
// passes, the VM dies or is removed, or the caller goes away.
Status AwaitGuestReady(CommandContext& ctx, VmHost& host, GuestControl& guests, const VmRecord& vm);

// Undoes a creation that failed: no domain (when `domain_made`), no record. Should
// destroying the domain fail, the record stays (phase "creating") for reconcile to finish.
void AbandonVm(CommandContext& ctx, const VmRecord& vm, bool domain_made, const char* verb);

// Writes a progress line to stderr unless the caller wants --json.
void Progress(CommandContext& ctx, const std::string& line);

// "1.2s".
std::string SecondsText(double seconds);

}  // namespace warren
