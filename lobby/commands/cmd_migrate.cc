// migrate VM HOST (admins): moves a VM, with its disk, to another of the lobby's hosts
// (vmhost/host_set.h Migrate, VmHost::MigrateTo). A running or paused VM moves live: its
// processes, jobs and their output go on there; a stopped one moves cold. The target must
// take it as it would take a new VM (vm_placement.h CheckHostTakes: it answers, isolates its
// VMs, is not drained, has room); the host checks its room again as it moves. Refused or cut
// short, the VM stays where it was, as it was. After the move the record names the new host
// and the guest's control connection is dialled again there: a dial during the switchover
// waits for the move to end (VmHosts::DialControl, HostSet::AwaitMove). Should
// warren die between the move and the record, reconcile makes the record follow the domain
// (reconcile.h).
#include <CLI/CLI.hpp>

#include "lobby/base/host_name.h"
#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/vm_placement.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_set.h"

namespace warren {
namespace {

std::string Seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

class MigrateCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("HOST", host_, "the host to move it to (see hosts)")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    HostSet* hosts = ctx.services.hosts;
    if (hosts == nullptr) return Unavailable("this server runs no VM hosts");
    if (!ctx.caller().scope.tag.empty()) {
      return PermissionDenied("a migration moves a VM between the hosts every user's VMs share; " +
                              CredentialNoun(ctx.caller()) + " is limited to tag " +
                              ctx.caller().scope.tag);
    }
    WARREN_RETURN_IF_ERROR(CheckHostName(host_));
    const VmRecord vm = *ctx.vm;
    const std::string from = HostOfRecord(ctx.services, vm);
    if (from == host_) return InvalidArgument(vm.name + " is on host " + host_ + " already");
    if (hosts->member(host_) == nullptr) {
      std::string names;
      for (const std::string& n : hosts->names()) names += (names.empty() ? "" : ", ") + n;
      return NotFound("no host named " + host_ + "; the hosts are " + names);
    }
    WARREN_ASSIGN_OR_RETURN(VmInfo info, hosts->Inspect(vm.id));
    const bool running = info.state == VmState::kRunning || info.state == VmState::kPaused;
    WARREN_RETURN_IF_ERROR(CheckHostTakes(ctx, vm, host_, running)
                               .Annotate("moving " + vm.name + " to host " + host_));
    Result<MigrationReport> moved = hosts->Migrate(vm.id, host_);
    if (!moved.ok()) {
      return moved.status().Annotate("moving " + vm.name + " from host " + info.host + " to " +
                                     host_ + " (it stays on " + info.host + ")");
    }
    Status recorded = ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      r.host = host_;
      return Status::Ok();
    });
    if (!recorded.ok()) {
      // The VM is there now: reconcile makes the record follow it.
      LogError("migrate: " + LogQuote(vm.name) + " moved to host " + host_ +
               " but its record still names " + from + ": " + LogQuote(recorded.ToString()));
    }
    // A live move's control connection died with the source's QEMU at the switchover; a
    // redial meanwhile waited for the move and reached the target (VmHosts::DialControl), so
    // it is kept. A stopped VM's has nothing to keep.
    if (!moved->live && ctx.services.guests != nullptr) ctx.services.guests->Disconnect(vm.id);
    LogInfo("migrate: " + LogQuote(vm.name) + " id=" + vm.id + " from=" + info.host +
            " to=" + host_ + " live=" + (moved->live ? "yes" : "no") + " total_ms=" +
            std::to_string(moved->total_ms) + " downtime_ms=" + std::to_string(moved->downtime_ms));

    CommandResult r;
    r.data = {{"name", vm.name},           {"id", vm.id},
              {"from", info.host},         {"to", host_},
              {"live", moved->live},       {"total_ms", moved->total_ms},
              {"disk_ms", moved->disk_ms}, {"disk_bytes", moved->disk_bytes}};
    if (moved->downtime_ms >= 0) r.data["downtime_ms"] = moved->downtime_ms;
    if (moved->memory_bytes >= 0) r.data["memory_bytes"] = moved->memory_bytes;
    if (!recorded.ok()) r.data["record_error"] = recorded.ToString();
    r.text = "moved " + vm.name + " from host " + info.host + " to host " + host_ +
             (moved->live ? " live" : " (stopped)") + " in " + Seconds(moved->total_ms) +
             (moved->live && moved->downtime_ms >= 0
                  ? "; it was paused for " + Seconds(moved->downtime_ms)
                  : std::string()) +
             "\n";
    return r;
  }

 private:
  std::string vm_, host_;
};

}  // namespace

void RegisterMigrateCommand(CommandTable& table) {
  table.Add({
      .path = "migrate",
      .summary = "move a VM to another host (admins)",
      .args = "VM HOST",
      .description =
          "Moves VM to HOST (see hosts) with its disk. A running or paused VM moves live: its "
          "processes, jobs and their output go on there; it is paused while its last disk "
          "writes and its memory cross (--json: downtime_ms). A stopped VM moves as it is. "
          "HOST must take it as it takes a new VM: it answers, isolates its VMs, is not "
          "drained and has room. Refused or failed, the VM stays where it was, as it was.\n",
      .admin_only = true,
      .target = {"VM", VmNeed::kReady},
      .make = [] { return std::make_unique<MigrateCommand>(); },
  });
}

}  // namespace warren
