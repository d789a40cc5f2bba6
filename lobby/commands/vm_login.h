// `ssh NAME@HOST` and `ssh vm+NAME@HOST`: which login names lead into a VM, and whether a
// caller may go into it. The SSH surface asks these two functions and nothing else, so a VM
// login is allowed exactly when the lobby command `ssh NAME CMD` would be. Stateless;
// thread-safe (the store and the interpreter are).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/caller.h"
#include "lobby/commands/interpreter.h"

namespace warren {

// The VM a login name asks for, or nullopt for the lobby. "vm+NAME" always asks for VM NAME
// (an unknown name then gets a clear "no VM named" error). A bare NAME asks for a VM only
// when it is the name of a VM the caller can see: any other login name (the local user name
// OpenSSH sends by default, a typo, another user's VM) reaches the lobby, so the lobby is
// always reachable and a login name reveals nothing about VMs the caller cannot see.
std::optional<std::string> VmLoginTarget(Store& store, const Caller& caller,
                                         std::string_view login);

// Whether `caller` may use VM `name` right now through a VM login, checked for every channel:
// the credential is re-read from the store (a removed or expired key stops at once;
// Unauthenticated), it may run "ssh" (its --cmds; PermissionDenied), the VM is the caller's
// and within its tag (otherwise NotFound, worded exactly as for a VM that does not exist),
// it has finished being created and it is running (Conflict: "NAME is stopped; start it
// with: ssh -p PORT HOST start NAME"). Refreshes `caller`'s scope. Returns the VM.
Result<VmRecord> AuthorizeVmLogin(Interpreter& interpreter, Caller& caller, std::string_view name);

}  // namespace warren
