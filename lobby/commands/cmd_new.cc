// new: makes a VM and waits until it answers. The record is written first (phase
// "creating"), then the hypervisor makes the disk and domain and boots it, then the guest is
// asked to run its ready check until it succeeds (`true`, or with a network device its
// default route: vm_boot.h); only then is the VM "ready". Any failure on the way
// destroys the domain and deletes the record, so nothing is left half-made; should even
// that fail, the record stays "creating" and the daemon's reconcile finishes the cleanup.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "keys/vm_rules.h"
#include "lobby/base/log.h"
#include "lobby/base/time_format.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/image_catalog.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/integration_scope.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_boot.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_placement.h"
#include "lobby/commands/vm_view.h"
#include "lobby/commands/warm_pool.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_set.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr size_t kMaxSetupScriptBytes = 10 * 1024;

class NewCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    name_opt_ = app.add_option("--name", name_,
                               "the VM's name: 1-52 of a-z, 0-9 and '-', starting with a letter "
                               "(default: made up, like calm-otter-42)")
                    ->type_name("NAME");
    image_opt_ = app.add_option("--image", image_,
                                "the guest image: NAME or NAME@VERSION (default: debian; "
                                "`images` lists them)")
                     ->type_name("IMAGE");
    cpu_opt_ = app.add_option("--cpu", cpus_, "virtual CPUs (default 2)")->type_name("N");
    memory_opt_ = app.add_option("--memory", memory_, "memory: 2048 (MiB), 512M, 2G (default 2G)")
                      ->type_name("SIZE");
    disk_opt_ =
        app.add_option("--disk", disk_, "disk: 10 (GiB), 20G, 1T (default 10G)")->type_name("SIZE");
    app.add_option("--tag", tags_, "tags, comma-separated (repeatable)")->type_name("TAGS");
    app.add_option("--comment", comment_, "a note shown by ls -l (at most 200 bytes)")
        ->type_name("TEXT");
    app.add_option("--env", env_, "KEY=VALUE in the VM user's environment (repeatable)")
        ->type_name("K=V");
    app.add_option("--setup-script", setup_script_,
                   "/dev/stdin: a script read from your stdin (at most 10 KiB) that runs once, "
                   "at first boot, as the VM user")
        ->type_name("FILE");
    app.add_option("--integration", integrations_,
                   "attach this integration to the VM (repeatable; see integrations list)")
        ->type_name("NAME");
    app.add_flag("--sandbox", sandbox_,
                 "make a sandbox: a size's vCPUs and memory reserved on the host, and a "
                 "lifetime after which it is destroyed (see above)");
    size_opt_ =
        app.add_option("--size", size_, "a sandbox's size (default small)")->type_name("SIZE");
    timeout_opt_ = app.add_option("--timeout", timeout_,
                                  "a sandbox's lifetime: 90s, 15m, 2h (default 15m, at most 24h)")
                       ->type_name("DURATION");
    host_opt_ = app.add_option("--host", host_,
                               "admins: the host to make it on (see hosts); default: the one "
                               "with the most free memory")
                    ->type_name("HOST");
    egress_opt_ = app.add_option("--egress", egress_,
                                 "what the VM may reach (default: the server's, all unless "
                                 "set otherwise; see above)")
                      ->type_name(EgressPolicyChoices());
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    WARREN_ASSIGN_OR_RETURN(VmHost * host, RequireVmHost(ctx));
    WARREN_ASSIGN_OR_RETURN(GuestControl * guests, RequireGuests(ctx));
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, Plan(ctx));
    VmSpec spec = NewVmSpec(ctx, vm);
    spec.setup_script = setup_script_text_;
    // Checked with stand-in id and name before anything is written.
    WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
    if (host_opt_->count() > 0 && !ctx.caller().admin) {
      return PermissionDenied("new --host is for admins: other VMs go where there is room");
    }
    const auto start = std::chrono::steady_clock::now();
    // A host where an idle VM of this shape waits in the warm pool is preferred.
    const std::vector<std::string> pooled_on = ctx.services.pool != nullptr
                                                   ? ctx.services.pool->HostsWithIdle(ShapeOf(spec))
                                                   : std::vector<std::string>{};
    WARREN_ASSIGN_OR_RETURN(vm.host, PlaceNewVm(ctx, vm, host_, pooled_on));
    spec.host = vm.host;
    // An idle VM of this shape on that host is this one's from here on.
    const bool pooled = TakePooledVm(ctx, spec, vm);
    if (Status st = RecordAndPrepareVm(ctx, vm, spec, "new"); !st.ok()) {
      if (pooled) PutBackPooledVm(ctx, spec, vm);
      return st;
    }
    ctx.audit_vm = vm.name;
    if (Status st = AttachVmIntegrations(ctx, vm, integrations_); !st.ok()) {
      AbandonVm(ctx, vm, /*domain_made=*/pooled, "new");
      return st;
    }
    Progress(ctx, "creating " + vm.name + " (" + vm.image + ", " + std::to_string(vm.cpus) +
                      " vCPU, " + FormatMib(vm.memory_mib) + " memory, " +
                      std::to_string(vm.disk_gib) + " GiB disk)…");
    RestoredVm restored;
    if (Status st = MakeVmOnHost(ctx, *host, spec, vm, &restored); !st.ok()) {
      // A pooled VM that failed to take its identity was destroyed already.
      AbandonVm(ctx, vm, /*domain_made=*/false, "new");
      return st.Annotate("creating " + vm.name);
    }
    const bool restored_vm = vm.made != "boot";
    Progress(ctx, vm.made == "pool"       ? "taken from the warm pool…"
                  : vm.made == "template" ? "restored from a template…"
                                          : "booting…");
    WARREN_RETURN_IF_ERROR(
        FinishNewVm(ctx, *host, *guests, vm, "new", start, restored_vm ? &restored : nullptr));
    // Connected before it had a record, and paused when they were attached: the proxy sets
    // up its integrations' endpoint now.
    if (vm.made == "pool" && !integrations_.empty()) NotifyIntegrations(ctx.services, vm.owner);

    const std::string took = SecondsText(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    const ServerInfo& info = ctx.services.info;
    CommandResult r;
    r.data = VmJson(vm, "running", info);
    r.data["ready_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.data["made"] = vm.made;
    if (!integrations_.empty()) r.data["integrations"] = integrations_;
    r.text =
        "Ready in " + took + "\n" + VmSshCommand(info, vm.name) + "\n" + VmUrlLine(info, vm.name);
    if (IsSandbox(vm)) {
      r.text += "sandbox " + vm.size + ", destroyed at " + FormatTime(vm.expires_at) +
                " unless extended (extend " + vm.name + " --minutes N)\n";
    }
    return r;
  }

 private:
  // Checks every flag and settles every value, before anything is written.
  Result<VmRecord> Plan(CommandContext& ctx) {
    const VmDefaults& d = ctx.services.vm_defaults;
    if (name_opt_->count() > 0 && name_.empty()) WARREN_RETURN_IF_ERROR(CheckVmName(name_));
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, PlanNewVm(ctx, name_));
    // A sandbox's vCPUs and memory are its size's, and what it reserves.
    WARREN_RETURN_IF_ERROR(PlanSandbox(ctx, vm));
    if (!sandbox_) {
      vm.cpus = cpu_opt_->count() > 0 ? cpus_ : d.cpus;
      if (cpu_opt_->count() == 0 && ctx.services.vms != nullptr) {
        // The default never asks for more vCPUs than the host has cores (it would be refused).
        Result<HostCapacity> host = ctx.services.vms->Capacity();
        if (host.ok() && host->cpu_cores > 0) vm.cpus = std::min(vm.cpus, host->cpu_cores);
      }
      WARREN_RETURN_IF_ERROR(CheckVmCpus(vm.cpus, d));
      vm.memory_mib = d.memory_mib;
      if (memory_opt_->count() > 0) {
        WARREN_ASSIGN_OR_RETURN(vm.memory_mib, ParseMemoryMib(memory_));
      }
      WARREN_RETURN_IF_ERROR(CheckVmMemoryMib(vm.memory_mib, d));
    }
    vm.disk_gib = sandbox_disk_gib_ > 0 ? sandbox_disk_gib_ : d.disk_gib;
    if (disk_opt_->count() > 0) {
      WARREN_ASSIGN_OR_RETURN(vm.disk_gib, ParseDiskGib(disk_));
    }
    WARREN_RETURN_IF_ERROR(CheckVmDiskGib(vm.disk_gib, d));
    vm.egress = d.egress;
    if (egress_opt_->count() > 0) {
      WARREN_ASSIGN_OR_RETURN(vm.egress, ParseEgressPolicy("--egress", egress_));
    }
    WARREN_ASSIGN_OR_RETURN(vm.tags, ParseTags(tags_));
    WARREN_RETURN_IF_ERROR(CheckGivenTags(ctx, vm.tags));
    WARREN_RETURN_IF_ERROR(SettleNewVmTags(ctx, vm.tags));
    WARREN_RETURN_IF_ERROR(CheckComment(comment_));
    vm.comment = comment_;
    if (env_.size() > kMaxEnvEntries) {
      return InvalidArgument("at most " + std::to_string(kMaxEnvEntries) + " --env entries");
    }
    for (const std::string& e : env_) {
      WARREN_ASSIGN_OR_RETURN(auto kv, ParseEnvEntry(e));
      vm.env.push_back(std::move(kv));
    }
    WARREN_ASSIGN_OR_RETURN(integrations_, PlanVmIntegrations(ctx, integrations_));
    const std::string image = image_opt_->count() > 0 ? image_ : d.image;
    if (ctx.services.images.resolve) {
      WARREN_ASSIGN_OR_RETURN(vm.image, ctx.services.images.resolve(image));
    } else {
      vm.image = image;
    }
    // Last: it may wait on stdin.
    WARREN_RETURN_IF_ERROR(ReadSetupScript(ctx));
    return vm;
  }

  // --sandbox's size and lifetime; the flags that only sandboxes take are refused without
  // it, and a sandbox's vCPUs and memory come from its size alone.
  Status PlanSandbox(CommandContext& ctx, VmRecord& vm) {
    if (!sandbox_) {
      if (size_opt_->count() > 0 || timeout_opt_->count() > 0) {
        return InvalidArgument("--size and --timeout are for sandboxes: add --sandbox");
      }
      return Status::Ok();
    }
    if (cpu_opt_->count() > 0 || memory_opt_->count() > 0) {
      return InvalidArgument("a sandbox's vCPUs and memory come from its --size (" +
                             SandboxSizesText(ctx.services.sandboxes) + "), not --cpu or --memory");
    }
    const SandboxPolicy& policy = ctx.services.sandboxes;
    WARREN_ASSIGN_OR_RETURN(
        SandboxSize size,
        FindSandboxSize(policy, size_opt_->count() > 0 ? size_ : policy.default_size));
    int64_t lifetime = kDefaultSandboxSeconds;
    if (timeout_opt_->count() > 0) {
      WARREN_ASSIGN_OR_RETURN(lifetime, ParseSandboxLifetime("--timeout", timeout_));
    }
    vm.kind = std::string(kSandboxKind);
    vm.size = size.name;
    vm.cpus = size.cpus;
    vm.memory_mib = size.memory_mib;
    sandbox_disk_gib_ = size.disk_gib;
    vm.expires_at = ctx.now + lifetime;
    return Status::Ok();
  }

  Status ReadSetupScript(CommandContext& ctx) {
    if (setup_script_.empty()) return Status::Ok();
    if (setup_script_ != "/dev/stdin" && setup_script_ != "-") {
      return InvalidArgument(
          "--setup-script takes /dev/stdin: the server cannot read \"" +
          setup_script_.substr(0, 64) +
          "\" on your machine (over SSH only the command line arrives); send the file as "
          "stdin instead: ssh HOST new --setup-script /dev/stdin < " +
          setup_script_.substr(0, 64));
    }
    Result<std::string> script = ReadAll(*ctx.session.in, kMaxSetupScriptBytes);
    if (!script.ok()) {
      if (script.status().code() == Code::kTooLarge) {
        return TooLarge("the setup script is larger than 10 KiB");
      }
      return script.status().Annotate("reading the setup script from stdin");
    }
    if (script->empty()) return InvalidArgument("--setup-script /dev/stdin: stdin was empty");
    setup_script_text_ = std::move(script).value();
    return Status::Ok();
  }

  std::string name_, image_, memory_, disk_, comment_, setup_script_, egress_, size_, timeout_,
      host_;
  bool sandbox_ = false;
  int64_t sandbox_disk_gib_ = 0;  // its size's disk, when the size has one
  std::string setup_script_text_;
  int cpus_ = 0;
  std::vector<std::string> tags_, env_;
  std::vector<std::string> integrations_;  // --integration, then as planned
  CLI::Option* name_opt_ = nullptr;
  CLI::Option* image_opt_ = nullptr;
  CLI::Option* cpu_opt_ = nullptr;
  CLI::Option* memory_opt_ = nullptr;
  CLI::Option* disk_opt_ = nullptr;
  CLI::Option* egress_opt_ = nullptr;
  CLI::Option* host_opt_ = nullptr;
  CLI::Option* size_opt_ = nullptr;
  CLI::Option* timeout_opt_ = nullptr;
};

}  // namespace

void RegisterNewCommand(CommandTable& table) {
  table.Add({
      .path = "new",
      .summary = "make a VM",
      .description =
          "Makes a VM, boots it and waits until it answers, printing progress; then prints "
          "how long it took, the ssh command for it and its web address:\n"
          "  new\n"
          "  new --name web-1 --cpu 4 --memory 8G --disk 40G --tag prod\n"
          "  ssh HOST new --setup-script /dev/stdin < setup.sh\n"
          "Names are 1-52 of a-z, 0-9 and '-', start with a letter, and are unique on this "
          "server; root, dev, lobby and users' names are kept for logins (ssh NAME@HOST "
          "reaches the lobby, ssh vm+NAME@HOST a VM). Without --name one is made up. "
          "--setup-script reads the script from "
          "your stdin (/dev/stdin): the server cannot open files on your machine.\n"
          "A key or token limited to a tag gives its VMs that tag, and no other.\n"
          "--sandbox makes a sandbox: a VM of a --size whose vCPUs and memory are reserved on "
          "the host (a new sandbox that would overcommit it is refused), which is destroyed, "
          "disk and all, when its --timeout runs out (default 15m, at most 24h; `extend` gives "
          "it more). Without --name it is called sbx-xxxxxxxx. Each user may have 20 "
          "sandboxes at once unless an admin says otherwise.\n" +
          std::string(kEgressPolicyHelp),
      .make = [] { return std::make_unique<NewCommand>(); },
      .live_help =
          [](const Services& services) {
            return InstalledImagesText(services) +
                   "Sandbox sizes here: " + SandboxSizesText(services.sandboxes) + ".\n";
          },
  });
}

}  // namespace warren
