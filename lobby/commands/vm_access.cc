#include "lobby/commands/vm_access.h"

#include "keys/vm_rules.h"

#include <algorithm>

#include "lobby/base/log.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr size_t kMaxEchoedNameBytes = 64;

std::string Shown(std::string_view name) {
  if (name.size() <= kMaxEchoedNameBytes) return std::string(name);
  return std::string(name.substr(0, kMaxEchoedNameBytes)) + "…";
}

}  // namespace

bool VmVisibleTo(const Caller& caller, const VmRecord& vm) {
  if (vm.owner != caller.user) return false;
  if (caller.scope.tag.empty()) return true;
  return std::find(vm.tags.begin(), vm.tags.end(), caller.scope.tag) != vm.tags.end();
}

Result<VmRecord> FindVisibleVm(Store& store, const Caller& caller, std::string_view name) {
  // A malformed name is as unknown as any other (a login name may be anything).
  if (!CheckVmName(name).ok()) return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
  Result<VmRecord> vm = store.GetVmByName(name);
  if (!vm.ok()) {
    if (vm.status().code() == Code::kNotFound) {
      return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
    }
    return vm.status();
  }
  if (!VmVisibleTo(caller, *vm)) {
    return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
  }
  return vm;
}

Result<VmRecord> FindVisibleVm(CommandContext& ctx, std::string_view name) {
  if (ctx.audit_vm.empty()) ctx.audit_vm = Shown(name);
  return FindVisibleVm(ctx.store(), ctx.caller(), name);
}

Result<VmRecord> ResolveVm(Services& services, const Caller& caller, std::string_view name,
                           VmNeed need) {
  if (services.vms == nullptr || (need == VmNeed::kRunning && services.guests == nullptr)) {
    return Unavailable("this server runs no VMs");
  }
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, FindVisibleVm(*services.store, caller, name));
  if (need == VmNeed::kReady || need == VmNeed::kRunning) {
    WARREN_RETURN_IF_ERROR(RequireReady(vm));
  }
  if (need == VmNeed::kRunning) WARREN_RETURN_IF_ERROR(CheckVmRunning(services, vm));
  return vm;
}

Status CheckVmRunning(const Services& services, const VmRecord& vm) {
  if (services.vms == nullptr) return Unavailable("this server runs no VMs");
  Result<VmInfo> info = services.vms->Inspect(vm.id);
  if (info.ok() && info->state == VmState::kRunning) return Status::Ok();
  const std::string state = VmStateText(vm, info);
  const std::string lobby = SshHint(services.info);
  if (state == "paused") {
    return Conflict(vm.name + " is paused; resume it with: " + lobby + " resume " + vm.name);
  }
  if (state == "missing" || state == "unknown") {
    return Conflict(vm.name + " is " + state + "; see " + lobby + " stat " + vm.name);
  }
  return Conflict(vm.name + " is " + state + "; start it with: " + lobby + " start " + vm.name);
}

Result<std::vector<VmRecord>> VisibleVms(CommandContext& ctx) {
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> all, ctx.store().ListVms());
  std::vector<VmRecord> out;
  for (VmRecord& vm : all) {
    if (VmVisibleTo(ctx.caller(), vm)) out.push_back(std::move(vm));
  }
  return out;
}

Result<VmHost*> RequireVmHost(CommandContext& ctx) {
  if (ctx.services.vms == nullptr) return Unavailable("this server runs no VMs");
  return ctx.services.vms;
}

Result<GuestControl*> RequireGuests(CommandContext& ctx) {
  if (ctx.services.vms == nullptr || ctx.services.guests == nullptr) {
    return Unavailable("this server runs no VMs");
  }
  return ctx.services.guests;
}

Status RemoveVm(Services& services, const VmRecord& vm) {
  if (services.vms == nullptr) return Unavailable("this server runs no VMs");
  if (services.guests != nullptr) services.guests->Disconnect(vm.id);
  Status st = services.vms->Destroy(vm.id);
  // A domain already gone ("missing") is what removing it wanted anyway.
  if (!st.ok() && st.code() != Code::kNotFound) return st.Annotate("removing " + vm.name);
  st = services.store->DeleteVm(vm.id);
  if (!st.ok() && st.code() != Code::kNotFound) {
    LogError("removing " + LogQuote(vm.name) +
             ": its domain is destroyed but its record "
             "stays: " +
             LogQuote(st.ToString()));
    return st.Annotate("removing " + vm.name);
  }
  return Status::Ok();
}

Status RequireReady(const VmRecord& vm) {
  if (vm.phase == VmPhase::kReady) return Status::Ok();
  return Conflict(vm.name + " is still being created");
}

}  // namespace warren
