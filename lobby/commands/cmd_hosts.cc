// hosts, hosts drain, hosts undrain (admins): the VM hosts one lobby drives (serve --host
// NAME=URI, vmhost/host_set.h). `hosts` asks each host in turn what it has — whether it
// answers, its accelerator, whether its VMs are isolated from it, its VMs, cores, memory and
// disk — and shows what the lobby decided (drained). A drained host keeps and runs its VMs;
// placement (vm_placement.h) puts no new one there. The drain is kept in the store.
#include <CLI/CLI.hpp>

#include "lobby/base/host_name.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/host_set.h"

namespace warren {
namespace {

Result<HostSet*> RequireHosts(CommandContext& ctx) {
  if (ctx.services.hosts == nullptr) return Unavailable("this server runs no VM hosts");
  return ctx.services.hosts;
}

std::string GibText(int64_t bytes) {
  if (bytes == INT64_MAX) return "?";
  return std::to_string(bytes / (int64_t{1} << 30)) + " GiB";
}

class HostsCommand final : public Command {
 public:
  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(HostSet * hosts, RequireHosts(ctx));
    WARREN_ASSIGN_OR_RETURN(std::vector<HostRecord> records, ctx.store().ListHosts());
    TextTable table(
        {"NAME", "STATE", "ACCEL", "ISOLATED", "VMS", "CPUS", "MEM FREE", "DISK FREE", "URI"});
    nlohmann::json list = nlohmann::json::array();
    for (const HostStatus& h : hosts->Statuses()) {
      HostRecord record;
      for (const HostRecord& r : records) {
        if (r.name == h.name) record = r;
      }
      const std::string state = !h.reachable ? "unreachable" : record.drained ? "drained" : "up";
      const HostCapacity& c = h.capacity;
      const int64_t mem_free = c.memory_mib - c.memory_committed_mib;
      const int64_t disk_free =
          c.disk_free_bytes == INT64_MAX ? INT64_MAX : c.disk_free_bytes - c.disk_committed_bytes;
      nlohmann::json j = {{"name", h.name},
                          {"uri", h.uri},
                          {"state", state},
                          {"reachable", h.reachable},
                          {"drained", record.drained},
                          {"accel", h.accel},
                          {"isolated", h.isolated}};
      if (record.drained) {
        j["drained_at"] = record.drained_at;
        j["drained_by"] = record.drained_by;
      }
      if (h.reachable) {
        j["vms"] = h.vms;
        j["cpu_cores"] = c.cpu_cores;
        j["memory_mib"] = c.memory_mib;
        j["memory_committed_mib"] = c.memory_committed_mib;
        j["memory_free_mib"] = c.memory_free_mib;
        j["disk_free_bytes"] = c.disk_free_bytes;
        j["disk_committed_bytes"] = c.disk_committed_bytes;
        j["images"] = h.images;
        table.AddRow({h.name, state, h.accel.empty() ? "?" : h.accel, h.isolated ? "yes" : "no",
                      std::to_string(h.vms), std::to_string(c.cpu_cores),
                      FormatMib(std::max<int64_t>(0, mem_free)) + " of " + FormatMib(c.memory_mib),
                      GibText(std::max<int64_t>(0, disk_free)), h.uri});
      } else {
        j["error"] = h.error;
        table.AddRow({h.name, state, h.accel.empty() ? "?" : h.accel, h.isolated ? "yes" : "no",
                      "-", "-", "-", "-", h.uri});
      }
      list.push_back(std::move(j));
    }
    CommandResult r;
    r.data = {{"hosts", std::move(list)}};
    r.text = table.Render();
    for (const auto& j : r.data["hosts"]) {
      if (j.contains("error")) {
        r.text += j["name"].get<std::string>() + ": " + j["error"].get<std::string>() + "\n";
      }
    }
    return r;
  }
};

class DrainCommand final : public Command {
 public:
  explicit DrainCommand(bool drain) : drain_(drain) {}

  void DeclareFlags(CLI::App& app) override {
    app.add_option("HOST", name_, "the host's name (see hosts)")->required();
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(HostSet * hosts, RequireHosts(ctx));
    if (!ctx.caller().scope.tag.empty()) {
      return PermissionDenied("a drain acts for every user's VMs; " + CredentialNoun(ctx.caller()) +
                              " is limited to tag " + ctx.caller().scope.tag);
    }
    WARREN_RETURN_IF_ERROR(CheckHostName(name_));
    if (hosts->member(name_) == nullptr) return NotFound("no host named " + name_);
    HostRecord record;
    record.name = name_;
    WARREN_ASSIGN_OR_RETURN(std::vector<HostRecord> records, ctx.store().ListHosts());
    for (const HostRecord& r : records) {
      if (r.name == name_) record = r;
    }
    const bool changed = record.drained != drain_;
    if (changed) {
      record.drained = drain_;
      record.drained_at = drain_ ? ctx.now : 0;
      record.drained_by = drain_ ? ctx.caller().user : "";
      WARREN_RETURN_IF_ERROR(ctx.store().PutHost(record));
    }
    CommandResult r;
    r.data = {{"host", name_}, {"drained", drain_}, {"changed", changed}};
    r.text = "host " + name_ +
             (drain_ ? (changed ? " drained" : " was drained already")
                     : (changed ? " takes new VMs again" : " was not drained")) +
             (drain_ ? ": no new VM goes there; its VMs stay and run\n" : "\n");
    return r;
  }

 private:
  bool drain_;
  std::string name_;
};

}  // namespace

void RegisterHostsCommands(CommandTable& table) {
  table.Add({
      .path = "hosts",
      .summary = "list the VM hosts, what each has and holds (admins)",
      .description =
          "Lists the hosts this server runs VMs on (serve --host NAME=URI): whether each "
          "answers (unreachable: its VMs are kept and show as unreachable until it is back), "
          "its accelerator (kvm or tcg, probed on that host), whether its VMs are isolated "
          "from it (warren places no VM on a host without), how many VMs it holds, its cores, "
          "the memory VMs have not taken and the disk they may not grow into; --json also "
          "lists the image versions each host holds (a host that lacks one is sent it when "
          "a VM needs it).\n",
      .read_only = true,
      .admin_only = true,
      .make = [] { return std::make_unique<HostsCommand>(); },
  });
  table.Add({
      .path = "hosts drain",
      .summary = "place no new VM on a host (admins)",
      .args = "HOST",
      .description = "Stops placing new VMs on HOST: its VMs stay and run, `cp` of them is "
                     "still made there (the disk is there). Kept across restarts. Undo with "
                     "hosts undrain HOST.\n",
      .admin_only = true,
      .make = [] { return std::make_unique<DrainCommand>(true); },
  });
  table.Add({
      .path = "hosts undrain",
      .summary = "let a drained host take new VMs again (admins)",
      .args = "HOST",
      .description = "Undoes hosts drain HOST.\n",
      .admin_only = true,
      .make = [] { return std::make_unique<DrainCommand>(false); },
  });
}

}  // namespace warren
