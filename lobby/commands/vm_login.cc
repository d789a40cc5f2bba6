#include "lobby/commands/vm_login.h"

#include <vector>

#include "lobby/commands/command.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/login_names.h"
#include "lobby/commands/vm_access.h"

namespace warren {
namespace {

constexpr std::string_view kVmPrefix = "vm+";

}  // namespace

std::optional<std::string> VmLoginTarget(Store& store, const Caller& caller,
                                         std::string_view login) {
  if (login.substr(0, kVmPrefix.size()) == kVmPrefix) {
    return std::string(login.substr(kVmPrefix.size()));
  }
  // Reserved login names (root, dev, lobby, every user's name) always reach the lobby; no
  // VM may carry one, so this decides nothing about VMs and reveals nothing.
  if (IsReservedLoginName(store, login)) return std::nullopt;
  const CommandHinter no_hint = [](const std::vector<std::string>&) {
    return std::optional<std::string>();
  };
  if (!FindVisibleVm(store, caller, login, no_hint).ok()) return std::nullopt;
  return std::string(login);
}

Result<VmRecord> AuthorizeVmLogin(Interpreter& interpreter, Caller& caller, std::string_view name) {
  Services& services = interpreter.services();
  WARREN_RETURN_IF_ERROR(RevalidateCaller(caller, *services.store, services.clock->NowUnix()));
  // The same permission as the lobby command `ssh VM CMD`.
  CommandTable::Match ssh = interpreter.table().Lookup(std::vector<std::string>{"ssh"});
  if (ssh.spec == nullptr) return Internal("the ssh command is not registered");
  WARREN_RETURN_IF_ERROR(CheckCommandAllowed(caller, *ssh.spec));
  // And the same target rule: visible to the caller, ready, running.
  return ResolveVm(services, caller, name, VmNeed::kRunning);
}

}  // namespace warren
