// Which VMs a caller may see and act on, shared by every VM command. A caller sees only its
// own VMs, and a credential limited to a tag sees only its own VMs that carry the tag;
// every other VM answers "not found", exactly like one that does not exist, so a scoped
// token learns nothing about the rest. Stateless functions; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace warren {

class VmHost;
class GuestControl;

// Whether `vm` carries the tag the caller's credential is limited to (always, when none):
// the one tag rule, whoever owns the VM.
bool WithinTagLimit(const Caller& caller, const VmRecord& vm);
// Whether the caller sees `vm` at all: its own, and within its tag limit.
bool VmVisibleTo(const Caller& caller, const VmRecord& vm);

// How a message names a command the caller could run next (CommandHint for a command's
// caller), or nullopt when it cannot.
using CommandHinter = std::function<std::optional<std::string>(const std::vector<std::string>&)>;
// The hints for a caller outside any command session (a VM login): the lobby command line
// as run from a shell, "ssh -p 2222 HOST start web-1".
CommandHinter ShellHints(const ServerInfo& info);
// The hints for the caller of `ctx` (CommandHint).
CommandHinter SessionHints(const CommandContext& ctx);

// The one resolver of a VM name for a caller: the VM named `name` if the caller may see
// it; NotFound ("no VM named …; see "ls"") otherwise, worded exactly as for a VM that does
// not exist.
Result<VmRecord> FindVisibleVm(Store& store, const Caller& caller, std::string_view name,
                               const CommandHinter& hint);
// The same for the caller of `ctx`, recording the name for the audit line: for commands
// that take several VMs or none (rm VM…, jobs, wait JOB).
Result<VmRecord> FindVisibleVm(CommandContext& ctx, std::string_view name);

// FindVisibleVm, then what `need` asks (CommandSpec::target, resolved at dispatch): that
// this server runs VMs (Unavailable), that the VM is ready (RequireReady) and that it runs
// (CheckVmRunning). Messages name commands through `hint`.
Result<VmRecord> ResolveVm(Services& services, const Caller& caller, std::string_view name,
                           VmNeed need, const CommandHinter& hint);
// The same with ShellHints.
Result<VmRecord> ResolveVm(Services& services, const Caller& caller, std::string_view name,
                           VmNeed need);

// Conflict unless the hypervisor says `vm` runs, with how to get it there when the caller
// can: "web-1 is stopped; start it with: "start web-1"" (paused: resume; missing or
// unknown: see stat). Needs services.vms.
Status CheckVmRunning(const Services& services, const VmRecord& vm, const CommandHinter& hint);

// The caller's VMs, by name.
Result<std::vector<VmRecord>> VisibleVms(CommandContext& ctx);

// The VM host and guest control, or Unavailable when this server runs no VMs.
Result<VmHost*> RequireVmHost(CommandContext& ctx);
Result<GuestControl*> RequireGuests(CommandContext& ctx);

// Conflict unless the VM has finished being created and is not being removed.
Status RequireReady(const VmRecord& vm);

// Marks the record "removing" (reconcile finishes the removal should warren stop
// half-way), destroys the VM's domain and disk (one already gone is fine), drops its
// control connection, then deletes its record and jobs. On a hypervisor error nothing is
// deleted and the mark is taken back, so the VM stays listed and can be removed again.
// Needs services.vms.
Status RemoveVm(Services& services, const VmRecord& vm);

}  // namespace warren
