// ls, stat, console: looking at VMs. Read-only. ls shows what the store knows merged with
// the hypervisor's state of each; stat asks the hypervisor about one VM.
#include <fnmatch.h>

#include <algorithm>

#include <CLI/CLI.hpp>

#include "lobby/base/time_format.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_boot.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr int kDefaultConsoleLines = 50;
constexpr int kMaxConsoleLines = 5000;

// A word of `ls`: a glob on names ("web-*"), or a tag.
bool Matches(const VmRecord& vm, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), vm.name.c_str(), 0) == 0) return true;
    if (std::find(vm.tags.begin(), vm.tags.end(), p) != vm.tags.end()) return true;
  }
  return false;
}

std::string JoinTags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& t : tags) out += (out.empty() ? "" : ",") + t;
  return out;
}

// When a sandbox goes: "in 14m", "now"; "-" for a VM.
std::string ExpiresText(const VmRecord& vm, int64_t now) {
  if (!IsSandbox(vm)) return "-";
  if (vm.expires_at <= now) return "now";
  return "in " + FormatDuration(vm.expires_at - now);
}

class LsCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_flag("-l,--long", long_, "also cpu, memory, disk, egress, image, created and comment");
    app.add_flag("--sandbox", sandboxes_only_, "only sandboxes (new --sandbox)");
    app.add_option("PATTERN", patterns_, "a name glob (web-*) or a tag; any may match");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> vms, VisibleVms(ctx));
    HostView host(ctx.services.vms);
    const ServerInfo& info = ctx.services.info;
    nlohmann::json list = nlohmann::json::array();
    std::vector<std::string> header = {"NAME", "STATE", "SSH", "TAGS"};
    const bool any_sandbox =
        std::any_of(vms.begin(), vms.end(), [](const VmRecord& vm) { return IsSandbox(vm); });
    if (any_sandbox) header.push_back("EXPIRES");
    // Where each VM runs, once there is more than one place it could.
    const bool any_host =
        std::any_of(vms.begin(), vms.end(), [](const VmRecord& vm) { return !vm.host.empty(); });
    if (long_) {
      for (const char* h : {"CPU", "MEM", "DISK", "EGRESS", "IMAGE", "CREATED", "COMMENT"}) {
        header.push_back(h);
      }
      if (any_host) header.push_back("HOST");
    }
    TextTable table(header);
    size_t shown = 0;
    for (const VmRecord& vm : vms) {
      if (!Matches(vm, patterns_) || (sandboxes_only_ && !IsSandbox(vm))) continue;
      const std::string state = VmStateText(vm, host.Find(vm.id));
      list.push_back(VmJson(vm, state, info));
      std::vector<std::string> row = {vm.name, state, VmSshCommand(info, vm.name),
                                      JoinTags(vm.tags)};
      if (any_sandbox) row.push_back(ExpiresText(vm, ctx.now));
      if (long_) {
        row.push_back(std::to_string(vm.cpus));
        row.push_back(FormatMib(vm.memory_mib));
        row.push_back(std::to_string(vm.disk_gib) + " GiB");
        row.push_back(vm.egress);
        row.push_back(vm.image);
        row.push_back(FormatTime(vm.created_at));
        row.push_back(vm.comment);
        if (any_host) row.push_back(vm.host.empty() ? "-" : vm.host);
      }
      table.AddRow(std::move(row));
      ++shown;
    }
    CommandResult r;
    r.data = {{"vms", std::move(list)}};
    if (shown > 0) {
      r.text = table.Render();
    } else if (!patterns_.empty()) {
      r.text = "no VMs match\n";
    } else if (sandboxes_only_) {
      r.text = "no sandboxes; make one with: new --sandbox\n";
    } else {
      r.text = "no VMs yet; make one with: new\n";
    }
    return r;
  }

 private:
  bool long_ = false;
  bool sandboxes_only_ = false;
  std::vector<std::string> patterns_;
};

// " (from a template in 0.8s)"; nothing for a record from before warren kept it.
std::string MadeText(const VmRecord& vm) {
  if (vm.made_ms <= 0) return "";
  const std::string how = vm.made == "boot"        ? "booted"
                          : vm.made == "template"  ? "from a template"
                          : vm.made == "pool"      ? "from the warm pool"
                          : vm.made == "live-copy" ? "copied live"
                                                   : "copied";
  return " (" + how + " in " + SecondsText(static_cast<double>(vm.made_ms) / 1000.0) + ")";
}

class StatCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override { app.add_option("VM", vm_, "the VM")->required(); }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const VmRecord& vm = *ctx.vm;
    Result<VmInfo> info = ctx.services.vms->Inspect(vm.id);
    // Missing, or on a host that does not answer: the record is what there is to show.
    if (!info.ok() && info.status().code() != Code::kNotFound &&
        info.status().code() != Code::kUnavailable) {
      return info.status().Annotate("asking the hypervisor about " + vm.name);
    }
    const std::string state = VmStateText(vm, info);
    CommandResult r;
    r.data = VmJson(vm, state, ctx.services.info);
    int64_t uptime = 0;
    if (info.ok()) {
      // The hypervisor's figures are what the VM has now (a resize may be pending).
      r.data["cpus"] = info->cpus;
      r.data["memory_mib"] = info->memory_mib;
      r.data["disk_gib"] = info->disk_gib;
      r.data["started_at"] = info->started_at;
      if (info->state != VmState::kStopped && info->started_at > 0) {
        uptime = ctx.now - info->started_at;
      }
    }
    r.data["uptime_seconds"] = uptime;
    // How it was made and in how long (for operators and tests/bench/vm_new.py).
    r.data["made"] = vm.made;
    r.data["made_ms"] = vm.made_ms;
    r.text =
        "name:     " + vm.name + "\n" + "state:    " + state +
        (std::string(DesiredStateName(vm.desired_state)) != state && vm.phase == VmPhase::kReady
             ? " (wanted: " + std::string(DesiredStateName(vm.desired_state)) + ")"
             : "") +
        "\n" + "uptime:   " + (uptime > 0 ? FormatDuration(uptime) : "-") + "\n" +
        "cpu:      " + r.data["cpus"].dump() + " vCPU\n" +
        "memory:   " + FormatMib(r.data["memory_mib"].get<int64_t>()) + "\n" +
        "disk:     " + r.data["disk_gib"].dump() + " GiB\n" + "egress:   " + vm.egress + "\n" +
        "image:    " + vm.image + "\n" + "created:  " + FormatTime(vm.created_at) + MadeText(vm) +
        "\n" + "ssh:      " + VmSshCommand(ctx.services.info, vm.name) + "\n";
    if (!vm.host.empty()) r.text += "host:     " + vm.host + "\n";
    if (!info.ok() && info.status().code() == Code::kUnavailable) {
      r.text += "          (" + info.status().message() + ")\n";
    }
    if (IsSandbox(vm)) {
      r.text += "sandbox:  " + vm.size + ", expires " + ExpiresText(vm, ctx.now) + " (" +
                FormatTime(vm.expires_at) + ")\n";
    }
    if (!vm.tags.empty()) r.text += "tags:     " + JoinTags(vm.tags) + "\n";
    if (!vm.comment.empty()) r.text += "comment:  " + vm.comment + "\n";
    return r;
  }

 private:
  std::string vm_;
};

class ConsoleCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    app.add_option("--lines", lines_, "how many of the last lines (default 50)")->type_name("N");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    if (lines_ < 1 || lines_ > kMaxConsoleLines) {
      return InvalidArgument("--lines must be 1 to " + std::to_string(kMaxConsoleLines));
    }
    const VmRecord& vm = *ctx.vm;
    Result<std::string> log = ctx.services.vms->Console(vm.id, lines_);
    if (!log.ok()) {
      if (log.status().code() == Code::kNotFound) {
        return NotFound(vm.name + " has no console log: its domain is missing");
      }
      return log.status().Annotate("reading the console of " + vm.name);
    }
    CommandResult r;
    r.data = {{"name", vm.name}, {"console", *log}};
    r.text = *log;
    return r;
  }

 private:
  std::string vm_;
  int lines_ = kDefaultConsoleLines;
};

}  // namespace

void RegisterVmListCommands(CommandTable& table) {
  table.Add({
      .path = "ls",
      .summary = "list your VMs",
      .args = "[PATTERN|TAG…]",
      .description = "Lists your VMs: name, state, ssh command and tags; -l adds cpu, memory, "
                     "disk, egress, image, creation time and comment. Each word is a name glob "
                     "(web-*) or a tag; a VM is listed when any word matches.\n",
      .read_only = true,
      .make = [] { return std::make_unique<LsCommand>(); },
  });
  table.Add({
      .path = "stat",
      .summary = "show a VM's state, uptime and size",
      .args = "VM",
      .description = "Shows the VM's state as the hypervisor reports it (\"missing\" when its "
                     "domain is gone), uptime, vCPUs, memory, disk, egress, image and tags.\n",
      .read_only = true,
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<StatCommand>(); },
  });
  table.Add({
      .path = "console",
      .summary = "show a VM's boot and console log",
      .args = "VM",
      .description = "Prints the last lines of the VM's serial console: its boot messages, "
                     "and what to look at when it does not come up.\n",
      .read_only = true,
      .target = {"VM", VmNeed::kExists},
      .make = [] { return std::make_unique<ConsoleCommand>(); },
  });
}

}  // namespace warren
