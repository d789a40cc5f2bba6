#include "lobby/commands/vm_access.h"

#include <algorithm>

#include "lobby/base/log.h"
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

Result<VmRecord> FindVisibleVm(CommandContext& ctx, std::string_view name) {
  if (ctx.audit_vm.empty()) ctx.audit_vm = Shown(name);
  Result<VmRecord> vm = ctx.store().GetVmByName(name);
  if (!vm.ok()) {
    if (vm.status().code() == Code::kNotFound) {
      return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
    }
    return vm.status();
  }
  if (!VmVisibleTo(ctx.caller(), *vm)) {
    return NotFound("no VM named \"" + Shown(name) + "\"; see ls");
  }
  return vm;
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
