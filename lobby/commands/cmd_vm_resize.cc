// resize: more (or fewer) CPUs and memory, a bigger disk. Growth must fit the owner's limits
// (vm_quota.h) and the host checks everything before it changes anything (a shrinking disk
// is refused, so is more than the host has);
// the disk grows live and a running guest's root file system is grown at once over the
// control connection (`resize2fs`, online); CPUs and memory go into the VM's definition
// and take effect at its next restart, which the output says.
#include <CLI/CLI.hpp>

#include "keys/vm_rules.h"
#include "lobby/base/log.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_boot.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr int kGrowFsTimeoutMs = 60'000;
// Both images put an ext4 root straight on /dev/vda (packaging/images/README.md).
constexpr const char* kGrowRootFs = "sudo -n resize2fs /dev/vda";

class CaptureSink final : public OutputSink {
 public:
  void Write(std::string_view data) override {
    if (text.size() < 4096) text.append(data.substr(0, 4096 - text.size()));
  }
  std::string text;
};

class ResizeCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("VM", vm_, "the VM")->required();
    cpu_opt_ = app.add_option("--cpu", cpus_, "virtual CPUs")->type_name("N");
    memory_opt_ =
        app.add_option("--memory", memory_, "memory: 2048 (MiB), 512M, 2G")->type_name("SIZE");
    disk_opt_ = app.add_option("--disk", disk_, "disk: 20 (GiB), 20G, 1T; it only grows")
                    ->type_name("SIZE");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    VmHost* host = ctx.services.vms;
    const VmDefaults& d = ctx.services.vm_defaults;
    if (IsSandbox(*ctx.vm) && (cpu_opt_->count() > 0 || memory_opt_->count() > 0)) {
      // What it reserves on the host is its size; a bigger one is another sandbox.
      return InvalidArgument(ctx.vm->name + " is a sandbox of size " + ctx.vm->size +
                             ": its vCPUs and memory stay as they are (make one of another size "
                             "with new --sandbox --size); only --disk grows");
    }
    ResizeSpec spec;
    if (cpu_opt_->count() > 0) {
      WARREN_RETURN_IF_ERROR(CheckVmCpus(cpus_, d));
      spec.cpus = cpus_;
    }
    if (memory_opt_->count() > 0) {
      WARREN_ASSIGN_OR_RETURN(spec.memory_mib, ParseMemoryMib(memory_));
      WARREN_RETURN_IF_ERROR(CheckVmMemoryMib(spec.memory_mib, d));
    }
    if (disk_opt_->count() > 0) {
      WARREN_ASSIGN_OR_RETURN(spec.disk_gib, ParseDiskGib(disk_));
      WARREN_RETURN_IF_ERROR(CheckVmDiskGib(spec.disk_gib, d));
    }
    WARREN_RETURN_IF_ERROR(ValidateResizeSpec(spec));
    VmRecord vm = *ctx.vm;
    if (spec.disk_gib != 0 && spec.disk_gib < vm.disk_gib) {
      return InvalidArgument("the disk only grows: " + vm.name + "'s is " +
                             std::to_string(vm.disk_gib) + " GiB");
    }
    const VmRecord before = vm;
    WARREN_ASSIGN_OR_RETURN(const ResizeOutcome out, ResizeAndRecord(ctx, *host, spec, vm));

    Result<VmInfo> info = host->Inspect(vm.id);
    const std::string state = VmStateText(vm, info);
    std::string fs = "not needed";
    std::string text;
    if (out.disk_grown) {
      if (state == "running") {
        Status grown = GrowFileSystem(ctx, vm);
        if (!grown.ok()) {
          // The disk did grow; the guest grows its file system at its next boot anyway.
          return Status(grown.code(), "the disk of " + vm.name + " grew to " +
                                          std::to_string(vm.disk_gib) +
                                          " GiB, but growing its file system failed (" +
                                          grown.message() + "); it grows at the next restart");
        }
        fs = "grown";
      } else {
        fs = "at next start";
      }
    }
    auto change = [&](const char* what, const std::string& from, const std::string& to) {
      if (from != to) text += std::string(what) + " " + from + " -> " + to + "\n";
    };
    change("cpu", std::to_string(before.cpus), std::to_string(vm.cpus));
    change("memory", FormatMib(before.memory_mib), FormatMib(vm.memory_mib));
    change("disk", std::to_string(before.disk_gib) + " GiB", std::to_string(vm.disk_gib) + " GiB");
    if (text.empty()) text = "nothing changed\n";
    if (out.disk_grown) {
      text += fs == "grown" ? "the file system grew with the disk\n"
                            : "the file system grows when " + vm.name + " next starts\n";
    }
    if (out.restart_needed) {
      text += "cpu and memory take effect at the next restart: " + SshHint(ctx.services.info) +
              " restart " + vm.name + "\n";
    }
    CommandResult r;
    r.data = VmJson(vm, state, ctx.services.info);
    r.data["restart_needed"] = out.restart_needed;
    r.data["disk_grown"] = out.disk_grown;
    r.data["filesystem"] = fs;
    r.text = "resized " + vm.name + "\n" + text;
    return r;
  }

 private:
  // The host's resize and the new sizes in the store, under the owner's quota lock once
  // their limits allow the growth (vm_quota.h). The resize is recorded as pending before the
  // host is asked, so reconcile finishes it should warren stop in between (the host may
  // have made it, or half of it: a disk grown, the definition not yet). `vm` becomes the
  // record as stored.
  static Result<ResizeOutcome> ResizeAndRecord(CommandContext& ctx, VmHost& host,
                                               const ResizeSpec& spec, VmRecord& vm) {
    UserQuotaLock quota(vm.owner);
    const PendingResize resize{spec.cpus, spec.memory_mib, spec.disk_gib};
    VmRecord planned = vm;
    ApplyResize(planned, resize);
    WARREN_RETURN_IF_ERROR(CheckUserQuota(ctx, planned));
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      r.pending_resize = resize;
      return Status::Ok();
    }));
    Result<ResizeOutcome> out = host.Resize(vm.id, spec);
    if (!out.ok()) {
      // Refused (the host checks before it changes anything) or failed: not pending.
      if (Status st = ctx.store().UpdateVm(vm.id,
                                           [](VmRecord& r) {
                                             r.pending_resize.reset();
                                             return Status::Ok();
                                           });
          !st.ok()) {
        LogWarn("resize: " + LogQuote(vm.name) + ": " + LogQuote(st.ToString()));
      }
      if (out.status().code() == Code::kNotFound) {
        return NotFound(vm.name + "'s domain is missing; rm it and make a new one");
      }
      return out.status().Annotate("resizing " + vm.name);
    }
    WARREN_RETURN_IF_ERROR(ctx.store().UpdateVm(vm.id, [&](VmRecord& r) {
      ApplyResize(r, resize);
      vm = r;
      return Status::Ok();
    }));
    return out;
  }

  static Status GrowFileSystem(CommandContext& ctx, const VmRecord& vm) {
    WARREN_ASSIGN_OR_RETURN(GuestControl * guests, RequireGuests(ctx));
    CaptureSink out, err;
    GuestStreams streams;
    streams.out = &out;
    streams.err = &err;
    streams.cancel = ctx.session.cancel;
    streams.wait_ms = kGrowFsTimeoutMs;
    Result<GuestProgress> p = guests->Exec(vm.id, GuestCommand{kGrowRootFs, {}, ""}, streams);
    if (!p.ok()) return p.status();
    if (!p->finished) {
      (void)guests->Kill(vm.id, p->job);
      return Timeout("resize2fs did not finish in time");
    }
    if (p->exit_code != 0) {
      std::string why = err.text.empty() ? out.text : err.text;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      return Unavailable("resize2fs exited with " +
                         (p->exit_code ? std::to_string(*p->exit_code) : std::string("a signal")) +
                         (why.empty() ? "" : ": " + why));
    }
    return Status::Ok();
  }

  std::string vm_, memory_, disk_;
  int cpus_ = 0;
  CLI::Option* cpu_opt_ = nullptr;
  CLI::Option* memory_opt_ = nullptr;
  CLI::Option* disk_opt_ = nullptr;
};

}  // namespace

void RegisterVmResizeCommand(CommandTable& table) {
  table.Add({
      .path = "resize",
      .summary = "change a VM's CPUs, memory or disk",
      .args = "VM",
      .description =
          "Changes a VM's resources. The disk only grows; it grows at once, also while the VM "
          "runs, and so does its root file system. CPUs and memory take effect at the VM's "
          "next restart (the output says so):\n"
          "  resize web-1 --disk 40G\n"
          "  resize web-1 --cpu 4 --memory 8G\n",
      .target = {"VM", VmNeed::kReady},
      .make = [] { return std::make_unique<ResizeCommand>(); },
  });
}

}  // namespace warren
