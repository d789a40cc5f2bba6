#include "lobby/commands/vm_login.h"

#include <vector>

#include "keys/vm_rules.h"
#include "lobby/commands/command.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr std::string_view kVmPrefix = "vm+";

std::string Shown(std::string_view name) {
  constexpr size_t kMax = 64;
  if (name.size() <= kMax) return std::string(name);
  return std::string(name.substr(0, kMax)) + "…";
}

Status NoSuchVm(std::string_view name) {
  return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
}

// VM `name` as `caller` may see it, by the visibility rule of every VM command
// (vm_access.h VmVisibleTo) over the store's lookup. A malformed, unknown or invisible name
// all answer the same NotFound.
Result<VmRecord> FindVisibleVmByName(Store& store, const Caller& caller, std::string_view name) {
  if (!CheckVmName(name).ok()) return NoSuchVm(name);
  Result<VmRecord> vm = store.GetVmByName(name);
  if (!vm.ok()) {
    if (vm.status().code() == Code::kNotFound) return NoSuchVm(name);
    return vm.status();
  }
  if (!VmVisibleTo(caller, *vm)) return NoSuchVm(name);
  return vm;
}

}  // namespace

std::optional<std::string> VmLoginTarget(Store& store, const Caller& caller,
                                         std::string_view login) {
  if (login.substr(0, kVmPrefix.size()) == kVmPrefix) {
    return std::string(login.substr(kVmPrefix.size()));
  }
  if (!FindVisibleVmByName(store, caller, login).ok()) return std::nullopt;
  return std::string(login);
}

Result<VmRecord> AuthorizeVmLogin(Interpreter& interpreter, Caller& caller, std::string_view name) {
  Services& services = interpreter.services();
  WARREN_RETURN_IF_ERROR(RevalidateCaller(caller, *services.store, services.clock->NowUnix()));
  // The same permission as the lobby command `ssh VM CMD`.
  CommandTable::Match ssh = interpreter.table().Lookup(std::vector<std::string>{"ssh"});
  if (ssh.spec == nullptr) return Internal("the ssh command is not registered");
  WARREN_RETURN_IF_ERROR(CheckCommandAllowed(caller, *ssh.spec));

  Result<VmRecord> vm = FindVisibleVmByName(*services.store, caller, name);
  if (!vm.ok()) return vm.status();
  WARREN_RETURN_IF_ERROR(RequireReady(*vm));
  if (services.vms == nullptr || services.guests == nullptr) {
    return Unavailable("this server runs no VMs");
  }
  Result<VmInfo> info = services.vms->Inspect(vm->id);
  if (!info.ok() || info->state != VmState::kRunning) {
    std::string state = VmStateText(*vm, info);
    std::string lobby = SshHint(services.info);
    if (state == "paused") {
      return Conflict(vm->name + " is paused; resume it with: " + lobby + " resume " + vm->name);
    }
    if (state == "missing" || state == "unknown") {
      return Conflict(vm->name + " is " + state + "; see " + lobby + " stat " + vm->name);
    }
    return Conflict(vm->name + " is " + state + "; start it with: " + lobby + " start " + vm->name);
  }
  return vm;
}

}  // namespace warren
