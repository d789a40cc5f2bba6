// cp: a new VM from a copy of another's disk. The copy's record is written first (phase
// "creating"), then a running source's guest is asked to `sync`, then the host forks the
// disk chain (VmHost::Copy: no bytes copied, so the time does not depend on the disk's
// size) and boots the copy with its own identity: its name as hostname, its own SSH host
// key (services.prepare_vm), its own control socket and domain. The copy is "ready" once
// its guest runs a command. Any failure undoes the copy and leaves the source as it was; a
// crash half-way leaves a "creating" record that reconcile cleans up, and disk layers no
// VM uses, which the host collects.
//
// cp --live of a running source copies its memory too (VmHost::CopyLive: the source pauses
// for about half a second, no sync needed): the copy comes up running the source's
// processes and then takes its own identity in the guest, as a VM restored from a template
// does (FinishNewVm with the RestoredVm). A source that is not running is copied as without
// --live, which the output says.
#include <chrono>
#include <thread>

#include <CLI/CLI.hpp>

#include "keys/vm_rules.h"
#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/integration_scope.h"
#include "lobby/commands/vm_access.h"
#include "lobby/commands/vm_boot.h"
#include "lobby/commands/vm_egress.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_placement.h"
#include "lobby/commands/vm_view.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_load.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

// How long the source's guest may take to flush its page cache on a quiet host; a busy
// host's guest gets it stretched (vmhost/host_load.h) before the copy gives up.
constexpr std::chrono::milliseconds kSyncTimeout{30'000};

// How long a failed sync waits to see whether `rm` of the source caused it.
constexpr std::chrono::milliseconds kRemovalSettle{5'000};

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class CopyCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    app.add_option("SRC", src_, "the VM to copy")->required();
    app.add_option("NEW", new_name_, "the copy's name (default: made up, like calm-otter-42)");
    app.add_flag("--copy-tags,!--no-copy-tags", copy_tags_,
                 "give the copy the source's tags (default: on)");
    app.add_option("--egress", egress_,
                   "what the copy may reach (default: as the source; see above)")
        ->type_name(EgressPolicyChoices());
    app.add_flag("--live", live_,
                 "copy a running VM with its memory: the copy comes up running the source's "
                 "processes (a plain cp boots the copy from the disk)");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    VmHost* host = ctx.services.vms;
    WARREN_ASSIGN_OR_RETURN(GuestControl * guests, RequireGuests(ctx));
    const VmRecord& src = *ctx.vm;
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, Plan(ctx, src));
    VmSpec spec = NewVmSpec(ctx, vm);
    WARREN_RETURN_IF_ERROR(ValidateVmSpec(spec));
    Result<VmInfo> src_info = host->Inspect(src.id);
    if (!src_info.ok()) {
      if (src_info.status().code() == Code::kNotFound) {
        return NotFound(src.name + "'s domain is missing; it cannot be copied");
      }
      return src_info.status().Annotate("copying " + src.name);
    }
    // On the source's host: the disk chain the copy shares is there.
    vm.host = src_info->host.empty() ? HostOfRecord(ctx.services, src) : src_info->host;
    spec.host = vm.host;
    // --live of a source that is not running: its disk is all there is to copy.
    const bool live = live_ && src_info->state == VmState::kRunning;
    if (live && HostEgressFor(vm.egress) != HostEgressFor(src.egress)) {
      const std::string keeps =
          HostEgressFor(src.egress) == Egress::kAll ? "all" : "integrations or none";
      return InvalidArgument("a live copy keeps " + src.name +
                             "'s network device, so its egress can be " + keeps +
                             " only; copy it and change the copy's after with: egress " +
                             (new_name_.empty() ? std::string("NEW") : new_name_) + " " + egress_);
    }

    const auto start = std::chrono::steady_clock::now();
    WARREN_RETURN_IF_ERROR(RecordAndPrepareVm(ctx, vm, spec, "cp"));
    ctx.audit_vm = src.name + "->" + vm.name;
    // The copy reaches what SRC reaches: its attachments by id are carried (by tag, they
    // follow the tags). Another owner's copy gets none: names are per owner.
    if (vm.owner == src.owner) {
      Result<std::vector<std::string>> attached = VmAttachedIntegrations(ctx.store(), src);
      Status st = attached.ok() ? AttachVmIntegrations(ctx, vm, *attached) : attached.status();
      if (!st.ok()) {
        AbandonVm(ctx, vm, /*domain_made=*/false, "cp");
        return st.Annotate("carrying " + src.name + "'s integrations to " + vm.name);
      }
    }
    const bool synced = !live && src_info->state == VmState::kRunning;
    if (synced) {
      // The guest's page cache reaches its disk first: the copy sees what the source's
      // programs wrote, not just what the kernel happened to flush.
      Progress(ctx, "syncing " + src.name + "'s disk…");
      if (Status st = SyncGuest(ctx, *guests, src, vm); !st.ok()) {
        AbandonVm(ctx, vm, /*domain_made=*/false, "cp");
        return st;
      }
    }
    Progress(ctx, "copying " + src.name + " to " + vm.name + (live ? " with its memory…" : "…"));
    const auto fork_start = std::chrono::steady_clock::now();
    RestoredVm restored;
    Status copied = Status::Ok();
    if (live) {
      Result<RestoredVm> r = host->CopyLive(src.id, spec);
      if (r.ok()) restored = std::move(r).value();
      copied = r.status();
    } else {
      copied = host->Copy(src.id, spec);
    }
    if (!copied.ok()) {
      AbandonVm(ctx, vm, /*domain_made=*/false, "cp");
      if (copied.code() == Code::kNotFound && SourceRemoved(ctx, src)) {
        return RemovedWhileCopied(src, vm);
      }
      return copied.Annotate("copying " + src.name + " to " + vm.name);
    }
    const double fork_seconds = SecondsSince(fork_start);
    Progress(ctx, (live ? "giving " + vm.name + " its own identity…" : "booting " + vm.name + "…"));
    vm.made = live ? "live-copy" : "copy";
    WARREN_RETURN_IF_ERROR(
        FinishNewVm(ctx, *host, *guests, vm, "cp", start, live ? &restored : nullptr));

    const ServerInfo& info = ctx.services.info;
    const double total = SecondsSince(start);
    CommandResult r;
    r.data = VmJson(vm, "running", info);
    r.data["source"] = src.name;
    r.data["source_state"] = std::string(VmStateName(src_info->state));
    r.data["synced"] = synced;
    r.data["live"] = live;
    r.data["copy_seconds"] = fork_seconds;
    r.data["ready_seconds"] = total;
    r.data["made"] = vm.made;
    std::string how =
        live ? "memory and disk copied in " + SecondsText(fork_seconds) + ", its processes running"
             : "disk forked in " + SecondsText(fork_seconds) +
                   (synced ? ", after a sync in the guest" : "");
    if (live_ && !live) {
      how += "; " + src.name + " was " + std::string(VmStateName(src_info->state)) +
             ", not running: copied its disk";
    }
    r.text = "Copied " + src.name + " to " + vm.name + " (" + how + "); ready in " +
             SecondsText(total) + "\n" + VmSshCommand(info, vm.name) + "\n" +
             VmUrlLine(info, vm.name);
    return r;
  }

 private:
  static bool SourceRemoved(CommandContext& ctx, const VmRecord& src) {
    return ctx.store().GetVm(src.id).status().code() == Code::kNotFound;
  }
  static bool SourceRemovedWithin(CommandContext& ctx, const VmRecord& src,
                                  std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (SourceRemoved(ctx, src)) return true;
      if (std::chrono::steady_clock::now() >= until || ctx.session.cancel->cancelled()) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  static Status RemovedWhileCopied(const VmRecord& src, const VmRecord& vm) {
    return Conflict(src.name + " was removed while it was being copied; " + vm.name +
                    " was not made");
  }

  Result<VmRecord> Plan(CommandContext& ctx, const VmRecord& src) {
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, PlanNewVm(ctx, new_name_));
    vm.image = src.image;
    vm.cpus = src.cpus;
    vm.memory_mib = src.memory_mib;
    vm.disk_gib = src.disk_gib;
    vm.env = src.env;
    if (copy_tags_) vm.tags = src.tags;
    WARREN_RETURN_IF_ERROR(SettleNewVmTags(ctx, vm.tags));
    vm.egress = src.egress;
    if (!egress_.empty()) {
      WARREN_ASSIGN_OR_RETURN(vm.egress, ParseEgressPolicy("--egress", egress_));
    }
    return vm;
  }

  static Status SyncGuest(CommandContext& ctx, GuestControl& guests, const VmRecord& src,
                          const VmRecord& vm) {
    DiscardSink discard;
    GuestStreams streams;
    streams.out = &discard;
    streams.err = &discard;
    streams.cancel = ctx.session.cancel;
    streams.wait_ms = static_cast<int>(kSyncTimeout.count());
    Result<GuestProgress> p = guests.Exec(src.id, GuestCommand{"sync", {}, ""}, streams);
    std::chrono::milliseconds allowed = kSyncTimeout;
    if (p.ok() && !p->finished) {
      // Not done yet: a guest starved of CPU gets the rest of its stretched allowance.
      allowed = StretchedBy(kSyncTimeout, GuestSlowdownNow(ctx.services));
      if (allowed > kSyncTimeout) {
        streams.wait_ms = static_cast<int>((allowed - kSyncTimeout).count());
        p = guests.Wait(src.id, p->job, p->stdout_offset, p->stderr_offset, streams);
      }
    }
    if (!p.ok()) {
      if (p.status().code() == Code::kCancelled) return p.status();
      // `rm` of the source closes its control connection first, which ends the sync, and
      // deletes its record once the domain is gone: give it that long to tell the two apart.
      if (SourceRemovedWithin(ctx, src, kRemovalSettle)) return RemovedWhileCopied(src, vm);
      return Unavailable("could not sync " + src.name + "'s disk before copying it (" +
                         p.status().message() + "); nothing was copied");
    }
    if (!p->finished) {
      (void)guests.Kill(src.id, p->job);
      return Timeout("sync in " + src.name + " did not finish within " +
                     std::to_string(allowed.count() / 1000) + " s; nothing was copied");
    }
    if (p->exit_code != 0) {
      return Unavailable("sync in " + src.name + " failed; nothing was copied");
    }
    return Status::Ok();
  }

  std::string src_, new_name_, egress_;
  bool copy_tags_ = true;
  bool live_ = false;
};

}  // namespace

void RegisterVmCopyCommand(CommandTable& table) {
  table.Add({
      .path = "cp",
      .summary = "copy a VM",
      .args = "SRC [NEW]",
      .description =
          "Makes a new VM from a copy of SRC's disk, running or not, and boots it; SRC keeps "
          "running. The disk is forked rather than copied, so it takes about as long at any "
          "disk size. A running SRC is synced first, so the copy has every file SRC wrote. The "
          "copy has its own name (made up when NEW is absent), hostname and SSH host key, "
          "SRC's resources and environment, and SRC's tags unless --no-copy-tags:\n"
          "  cp web-1 web-2\n"
          "  cp web-1 --no-copy-tags\n"
          "  cp web-1 sandbox --egress integrations   (a copy cut off from the network)\n"
          "With --live a running SRC is copied with its memory: it pauses for about half a "
          "second, and the copy comes up running SRC's processes (a shell's background jobs, "
          "servers, what they hold in memory), then takes its own name, hostname, host key, "
          "machine-id and MAC. Its egress has to keep SRC's network device (all, or "
          "integrations/none). A SRC that is not running is copied as without --live:\n"
          "  cp web-1 web-2 --live\n" +
          std::string(kEgressPolicyHelp),
      .target = {"SRC", VmNeed::kReady},
      .make = [] { return std::make_unique<CopyCommand>(); },
  });
}

}  // namespace warren
