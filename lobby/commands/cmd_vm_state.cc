// start, stop, restart, pause, resume, rm, rename: changing what a VM is. Each state change
// asks the hypervisor first (which refuses a wrong state with Conflict) and then records the
// new desired state, which reconcile restores after a restart of warren or the host. Those
// that press the power button record first: a guest told to shut down powers off by itself,
// also should warren die before it records anything, and reconcile (which may still see it
// running) must know: `stop` records the desired state first (taken back when the host
// refuses), `restart` marks the record restarting while it runs.
#include <optional>
#include <set>

#include <CLI/CLI.hpp>

#include "keys/vm_rules.h"
#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/login_names.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/sandbox_room.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

struct Transition {
  const char* verb;   // "start"
  const char* done;   // "started"
  DesiredState then;  // recorded once the hypervisor agreed
  Status (VmHost::*act)(std::string_view id);
  bool drops_guest;  // the guest's control connection does not survive it
  // The VM holds its vCPUs and memory again, so its owner's limits must allow it (vm_quota.h).
  bool holds = false;
  // How the record is kept true should warren die half-way (see the top of this file).
  enum class Record { kAfter, kFirst, kMarkRestarting };
  Record record = Record::kAfter;
};

class StateCommand final : public Command {
 public:
  explicit StateCommand(const Transition& t) : t_(t) {}

  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "the VM")->required(); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    VmHost* host = ctx.services.vms;
    VmRecord vm = *ctx.vm;
    // Held until the new desired state is recorded: that is what holds the quota.
    std::optional<UserQuotaLock> quota;
    std::optional<SandboxRoomLock> room;  // a sandbox reserves its size on the host again
    if (t_.holds) {
      quota.emplace(vm.owner);
      VmRecord planned = vm;
      planned.desired_state = t_.then;
      WARREN_RETURN_IF_ERROR(CheckUserQuota(ctx, planned));
      if (IsSandbox(vm)) {
        room.emplace();
        WARREN_RETURN_IF_ERROR(CheckSandboxRoomFor(ctx, planned));
      }
    }
    if (t_.drops_guest && ctx.services.guests != nullptr) ctx.services.guests->Disconnect(vm.id);
    const DesiredState was = vm.desired_state;
    auto record = [&](DesiredState desired, bool restarting) {
      return ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
        r.desired_state = desired;
        r.restarting = restarting;
        return Status::Ok();
      });
    };
    if (t_.record != Transition::Record::kAfter) {
      WARREN_RETURN_IF_ERROR(record(t_.record == Transition::Record::kFirst ? t_.then : was,
                                    t_.record == Transition::Record::kMarkRestarting));
    }
    Status st = (host->*t_.act)(vm.id);
    if (!st.ok() && t_.record != Transition::Record::kAfter) {
      if (Status back = record(was, false); !back.ok()) {
        LogError(std::string(t_.verb) + ": " + LogQuote(vm.name) + ": " +
                 LogQuote(back.ToString()));
      }
    }
    if (st.code() == Code::kNotFound) {
      return NotFound(vm.name + "'s domain is missing; rm it and make a new one");
    }
    WARREN_RETURN_IF_ERROR(st.Annotate(vm.name));
    WARREN_RETURN_IF_ERROR(record(t_.then, false));
    room.reset();
    quota.reset();
    Result<VmInfo> info = host->Inspect(vm.id);
    vm.desired_state = t_.then;
    const std::string state = VmStateText(vm, info);
    CommandResult r;
    r.data = VmJson(vm, state, ctx.services.info);
    r.text = std::string(t_.done) + " " + vm.name + "\n";
    return r;
  }

 private:
  const Transition& t_;
  std::string vm_;
};

const Transition kStart{"start", "started", DesiredState::kRunning, &VmHost::Start, false, true};
const Transition kStop{.verb = "stop",
                       .done = "stopped",
                       .then = DesiredState::kStopped,
                       .act = &VmHost::Stop,
                       .drops_guest = true,
                       .record = Transition::Record::kFirst};
const Transition kRestart{.verb = "restart",
                          .done = "restarted",
                          .then = DesiredState::kRunning,
                          .act = &VmHost::Restart,
                          .drops_guest = true,
                          .record = Transition::Record::kMarkRestarting};
const Transition kPause{"pause", "paused", DesiredState::kPaused, &VmHost::Pause, false};
const Transition kResume{"resume", "resumed", DesiredState::kRunning, &VmHost::Resume, false};

class RmCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_flag("--sandbox", sandboxes_only_,
                 "remove only sandboxes: an ordinary VM named is refused (the sandbox API's "
                 "destroy)");
    app.add_option("VM", names_, "the VMs to remove")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_RETURN_IF_ERROR(RequireVmHost(ctx).status());
    nlohmann::json deleted = nlohmann::json::array();
    nlohmann::json failed = nlohmann::json::array();
    std::string text;
    Status first_error;
    std::set<std::string> seen;
    for (const std::string& name : names_) {
      if (!seen.insert(name).second) continue;
      Status st = Remove(ctx, name, sandboxes_only_);
      if (st.ok()) {
        deleted.push_back(name);
        text += "removed " + name + "\n";
      } else {
        failed.push_back({{"name", name}, {"error", st.message()}});
        text += "error: " + st.message() + "\n";
        if (first_error.ok()) first_error = st;
      }
    }
    ctx.audit_vm = names_.size() == 1 ? names_[0] : std::to_string(names_.size()) + " VMs";
    // Nothing removed: a plain error with its own code (404 for an unknown VM).
    if (deleted.empty()) {
      if (failed.size() == 1) return first_error;
      std::string all;
      for (const auto& f : failed) all += (all.empty() ? "" : "; ") + f["error"].get<std::string>();
      return Status(first_error.code(), all);
    }
    CommandResult r;
    r.data = {{"deleted", std::move(deleted)}, {"failed", failed}};
    r.text = text;
    // Some removed, some not: the result says which, and the exit status says "not all".
    if (!failed.empty()) r.exit_status = 1;
    return r;
  }

 private:
  static Status Remove(CommandContext& ctx, const std::string& name, bool sandboxes_only) {
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, FindVisibleVm(ctx, name));
    if (sandboxes_only && !IsSandbox(vm)) {
      return NotFound("no sandbox named \"" + vm.name + "\": it is a VM (rm without --sandbox)");
    }
    return RemoveVm(ctx.services, vm);
  }

  bool sandboxes_only_ = false;

  std::vector<std::string> names_;
};

class RenameCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("NEWNAME", new_name_, "its new name")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    VmHost* host = ctx.services.vms;
    VmRecord vm = *ctx.vm;
    const std::string old_name = vm.name;
    if (new_name_ != old_name) {
      WARREN_RETURN_IF_ERROR(CheckNewVmName(ctx.store(), new_name_));
      // The store first: it decides whether the name is free.
      WARREN_RETURN_IF_ERROR(ctx.store().RenameVm(vm.id, new_name_));
      if (Status st = host->Rename(vm.id, new_name_); !st.ok()) {
        if (Status back = ctx.store().RenameVm(vm.id, old_name); !back.ok()) {
          LogError("rename: hypervisor refused " + LogQuote(new_name_) +
                   " and the old name could not be restored: " + LogQuote(back.ToString()));
        }
        return st.Annotate("renaming " + old_name);
      }
      vm.name = new_name_;
    }
    HostView view(host);
    CommandResult r;
    r.data = VmJson(vm, VmStateText(vm, view.Find(vm.id)), ctx.services.info);
    r.data["old_name"] = old_name;
    r.text = "renamed " + old_name + " to " + vm.name +
             " (the guest takes the new hostname at its next boot)\n";
    return r;
  }

 private:
  std::string vm_, new_name_;
};

void AddTransition(CommandTable& table, const Transition& t, std::string summary,
                   std::string description) {
  table.Add({
      .path = t.verb,
      .summary = std::move(summary),
      .args = "VM",
      .description = std::move(description),
      .target = {"VM", VmNeed::kReady},
      .make = [&t] { return std::make_unique<StateCommand>(t); },
  });
}

}  // namespace

void RegisterVmStateCommands(CommandTable& table) {
  table.Add({
      .path = "rm",
      .summary = "remove VMs and their disks",
      .args = "VM…",
      .description = "Destroys each VM with its disk and jobs; there is no undo. Reports "
                     "{deleted, failed} and exits non-zero when any failed.\n",
      .make = [] { return std::make_unique<RmCommand>(); },
  });
  table.Add({
      .path = "rename",
      .summary = "rename a VM",
      .args = "VM NEWNAME",
      .description = "Renames a VM in any state; its ssh name and jobs follow at once, the "
                     "guest's hostname at its next boot.\n",
      .target = {"VM", VmNeed::kReady},
      .make = [] { return std::make_unique<RenameCommand>(); },
  });
  AddTransition(table, kStart, "start a stopped VM",
                "Boots a stopped VM. Its vCPUs and memory count toward your limits again, and "
                "must fit the host next to what runs.\n");
  AddTransition(table, kStop, "stop a VM, keeping its disk",
                "Shuts the VM down: its CPU and memory are freed, its disk is kept. Jobs "
                "running in it end.\n");
  AddTransition(table, kRestart, "reboot a running VM",
                "Reboots the VM. Jobs running in it end without an exit status.\n");
  AddTransition(table, kPause, "pause a running VM, keeping its memory",
                "Freezes the VM: its memory and processes are kept, it uses no CPU.\n");
  AddTransition(table, kResume, "resume a paused VM", "Lets a paused VM run again.\n");
}

}  // namespace warren
