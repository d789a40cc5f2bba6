#include "lobby/commands/vm_access.h"

#include "keys/vm_rules.h"

#include <algorithm>

#include "lobby/base/log.h"
#include "lobby/commands/tokenizer.h"
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

bool WithinTagLimit(const Caller& caller, const VmRecord& vm) {
  if (caller.scope.tag.empty()) return true;
  return std::find(vm.tags.begin(), vm.tags.end(), caller.scope.tag) != vm.tags.end();
}

bool VmVisibleTo(const Caller& caller, const VmRecord& vm) {
  return vm.owner == caller.user && WithinTagLimit(caller, vm);
}

CommandHinter ShellHints(const ServerInfo& info) {
  return [info](const std::vector<std::string>& argv) -> std::optional<std::string> {
    return SshHint(info) + " " + JoinQuoted(argv);
  };
}

CommandHinter SessionHints(const CommandContext& ctx) {
  return [&ctx](const std::vector<std::string>& argv) { return CommandHint(ctx, argv); };
}

Result<VmRecord> FindVisibleVm(Store& store, const Caller& caller, std::string_view name,
                               const CommandHinter& hint) {
  // A malformed name is as unknown as any other (a login name may be anything).
  if (!CheckVmName(name).ok()) {
    std::string message = "no VM named \"" + Shown(name) + "\"";
    if (std::optional<std::string> ls = hint({"ls"})) message += "; see " + *ls;
    return NotFound(message);
  }
  Result<VmRecord> vm = store.GetVmByName(name);
  if (vm.ok() && VmVisibleTo(caller, *vm)) return vm;
  if (!vm.ok() && vm.status().code() != Code::kNotFound) return vm.status();
  std::string message = "no VM named \"" + Shown(name) + "\"";
  if (std::optional<std::string> ls = hint({"ls"})) message += "; see " + *ls;
  return NotFound(message);
}

Result<VmRecord> FindVisibleVm(CommandContext& ctx, std::string_view name) {
  if (ctx.audit_vm.empty()) ctx.audit_vm = Shown(name);
  return FindVisibleVm(ctx.store(), ctx.caller(), name, SessionHints(ctx));
}

Result<VmRecord> ResolveVm(Services& services, const Caller& caller, std::string_view name,
                           VmNeed need, const CommandHinter& hint) {
  if (services.vms == nullptr || (need == VmNeed::kRunning && services.guests == nullptr)) {
    return Unavailable("this server runs no VMs");
  }
  WARREN_ASSIGN_OR_RETURN(VmRecord vm, FindVisibleVm(*services.store, caller, name, hint));
  if (need == VmNeed::kReady || need == VmNeed::kRunning) {
    WARREN_RETURN_IF_ERROR(RequireReady(vm));
  }
  if (need == VmNeed::kRunning) WARREN_RETURN_IF_ERROR(CheckVmRunning(services, vm, hint));
  return vm;
}

Result<VmRecord> ResolveVm(Services& services, const Caller& caller, std::string_view name,
                           VmNeed need) {
  return ResolveVm(services, caller, name, need, ShellHints(services.info));
}

Status CheckVmRunning(const Services& services, const VmRecord& vm, const CommandHinter& hint) {
  if (services.vms == nullptr) return Unavailable("this server runs no VMs");
  Result<VmInfo> info = services.vms->Inspect(vm.id);
  if (info.ok() && info->state == VmState::kRunning) return Status::Ok();
  // The host could not be asked (libvirt reconnecting): its own error says so and when to
  // try again, where "is unknown" would send the caller looking at the VM.
  if (!info.ok() && info.status().code() == Code::kUnavailable) return info.status();
  const std::string state = VmStateText(vm, info);
  std::string message = vm.name + " is " + state;
  if (state == "paused") {
    if (auto resume = hint({"resume", vm.name})) message += "; resume it with: " + *resume;
  } else if (state == "missing" || state == "unknown") {
    if (auto stat = hint({"stat", vm.name})) message += "; see " + *stat;
  } else if (auto start = hint({"start", vm.name})) {
    message += "; start it with: " + *start;
  }
  return Conflict(message);
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

namespace {

// Sets a ready VM's phase (a creating one keeps its own: reconcile removes it either way).
Status MarkVm(Store& store, const std::string& id, VmPhase from, VmPhase to) {
  return store.UpdateVm(id, [&](VmRecord& r) {
    if (r.phase == from) r.phase = to;
    return Status::Ok();
  });
}

}  // namespace

Status RemoveVm(Services& services, const VmRecord& vm) {
  if (services.vms == nullptr) return Unavailable("this server runs no VMs");
  // Marked first: should warren die between the domain and the record, reconcile finishes
  // the removal instead of keeping a record whose domain is gone.
  Status st = MarkVm(*services.store, vm.id, VmPhase::kReady, VmPhase::kRemoving);
  if (st.code() == Code::kNotFound) return Status::Ok();  // removed meanwhile
  WARREN_RETURN_IF_ERROR(st.Annotate("removing " + vm.name));
  if (services.guests != nullptr) services.guests->Disconnect(vm.id);
  st = services.vms->Destroy(vm.id);
  // A domain already gone ("missing") is what removing it wanted anyway.
  if (!st.ok() && st.code() != Code::kNotFound) {
    // Still there: it stays as it was, and can be removed again.
    if (Status back = MarkVm(*services.store, vm.id, VmPhase::kRemoving, VmPhase::kReady);
        !back.ok()) {
      LogError("removing " + LogQuote(vm.name) + ": " + LogQuote(back.ToString()));
    }
    return st.Annotate("removing " + vm.name);
  }
  st = services.store->DeleteVm(vm.id, services.clock->NowUnixMs());
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
  if (vm.phase == VmPhase::kRemoving) return Conflict(vm.name + " is being removed");
  return Conflict(vm.name + " is still being created");
}

}  // namespace warren
