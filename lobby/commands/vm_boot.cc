#include "lobby/commands/vm_boot.h"

#include "lobby/commands/vm_egress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string_view>

#include "keys/vm_rules.h"
#include "lobby/base/log.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/login_names.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/sandbox_room.h"
#include "lobby/commands/vm_flags.h"
#include "lobby/commands/vm_quota.h"
#include "lobby/commands/warm_pool.h"
#include "vmhost/guest/identity.h"
#include "vmhost/guest_control.h"
#include "vmhost/host_load.h"
#include "vmhost/host_set.h"
#include "vmhost/vm_host.h"

namespace warren {
namespace {

constexpr int kReadyPollMs = 250;
// The network check's shell says kNoDefaultRouteExit itself: keep the two together.
static_assert(kNoDefaultRouteExit == 3 &&
              std::string_view(kGuestNetworkReadyCommand).ends_with("; exit 3"));
constexpr int kConsoleLinesOnFailure = 20;
constexpr int kNameAttempts = 20;

std::string ConsoleTail(VmHost& host, const VmRecord& vm) {
  Result<std::string> console = host.Console(vm.id, kConsoleLinesOnFailure);
  if (!console.ok() || console->empty()) return "";
  std::string text = *console;
  if (text.back() != '\n') text += '\n';
  return " Last console lines:\n" + text;
}

}  // namespace

std::string SecondsText(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

void Progress(CommandContext& ctx, const std::string& line) {
  if (!ctx.json) ctx.session.err->Write(line + "\n");
}

Result<VmRecord> PlanNewVm(const CommandContext& ctx, const std::string& name) {
  VmRecord vm;
  vm.owner = ctx.caller().user;
  vm.created_at = ctx.now;
  // Its disk is metered from now (keys/usage.h); running time from when the host says so.
  vm.meter.disk_since_ms = ctx.services.clock->NowUnixMs();
  vm.desired_state = DesiredState::kRunning;
  vm.phase = VmPhase::kCreating;
  if (!name.empty()) {
    WARREN_RETURN_IF_ERROR(CheckNewVmName(ctx.store(), name));
    vm.name = name;
  }
  return vm;
}

Status CheckGivenTags(const CommandContext& ctx, const std::vector<std::string>& tags) {
  const std::string& scope_tag = ctx.caller().scope.tag;
  if (scope_tag.empty()) return Status::Ok();
  for (const std::string& t : tags) {
    if (t != scope_tag) {
      return PermissionDenied(CredentialNoun(ctx.caller()) + " is limited to the tag \"" +
                              scope_tag + "\" and may not give a VM another tag (\"" + t + "\")");
    }
  }
  return Status::Ok();
}

Status SettleNewVmTags(const CommandContext& ctx, std::vector<std::string>& tags) {
  // A credential limited to a tag makes VMs it can see.
  if (!ctx.caller().scope.tag.empty()) MergeTags(tags, {ctx.caller().scope.tag});
  if (tags.size() > kMaxTagsPerVm) {
    return InvalidArgument("a VM may carry at most " + std::to_string(kMaxTagsPerVm) + " tags");
  }
  return Status::Ok();
}

VmSpec NewVmSpec(const CommandContext& ctx, const VmRecord& vm) {
  VmSpec spec;
  spec.image = vm.image;
  spec.cpus = vm.cpus;
  spec.memory_mib = vm.memory_mib;
  spec.disk_gib = vm.disk_gib;
  // Stand-ins until RecordAndPrepareVm settles them, so the spec can be checked first.
  spec.name = vm.name.empty() ? "placeholder" : vm.name;
  spec.id = "placeholder0";
  spec.egress = HostEgressFor(vm.egress);
  spec.authorized_keys = ctx.services.control_authorized_key;
  spec.env = vm.env;
  return spec;
}

Status RecordAndPrepareVm(CommandContext& ctx, VmRecord& vm, VmSpec& spec, const char* verb) {
  WARREN_RETURN_IF_ERROR(RecordNewVm(ctx, vm));
  spec.id = vm.id;
  spec.name = vm.name;
  if (ctx.services.prepare_vm) {
    if (Status st = ctx.services.prepare_vm(spec); !st.ok()) {
      AbandonVm(ctx, vm, /*domain_made=*/false, verb);
      return st.Annotate("preparing " + vm.name);
    }
  }
  return Status::Ok();
}

bool TakePooledVm(CommandContext& ctx, VmSpec& spec, VmRecord& vm) {
  if (ctx.services.pool == nullptr) return false;
  std::optional<PooledVm> pooled = ctx.services.pool->Take(ShapeOf(spec), spec.host);
  if (!pooled.has_value()) return false;
  vm.id = std::move(pooled->id);
  vm.made = "pool";
  spec.ssh_host_key = std::move(pooled->host_key);
  spec.ssh_host_key_pub = std::move(pooled->host_key_pub);
  return true;
}

void PutBackPooledVm(CommandContext& ctx, const VmSpec& spec, const VmRecord& vm) {
  ctx.services.pool->PutBack(ShapeOf(spec), vm.host,
                             PooledVm{vm.id, spec.ssh_host_key, spec.ssh_host_key_pub});
}

Status ApplyRestoredIdentity(CommandContext& ctx, GuestControl& guests, const VmRecord& vm,
                             const RestoredVm& restored, bool has_host_key);

namespace {

// Reidentify, the guest taking its identity meanwhile, or else the pooled VM destroyed (the
// caller makes the VM another way).
Result<RestoredVm> ReidentifyPooled(CommandContext& ctx, VmHost& host, const VmSpec& spec,
                                    const VmRecord& vm) {
  GuestControl* guests = ctx.services.guests;
  // The spec's host key is the one the VM took when it was pooled (TakePooledVm): kept.
  const bool has_host_key = !spec.ssh_host_key.empty();
  Result<RestoredVm> r = host.Reidentify(spec, [&](const RestoredVm& restored) {
    if (guests == nullptr) return Unavailable("no guest control");
    return ApplyRestoredIdentity(ctx, *guests, vm, restored, has_host_key);
  });
  if (r.ok()) return r;
  LogWarn("new: pooled vm " + spec.id + " could not take its identity: " + r.status().ToString() +
          "; it is removed and the VM made without the pool");
  if (ctx.services.guests != nullptr) ctx.services.guests->Disconnect(spec.id);
  Status removed = host.Destroy(spec.id);
  if (!removed.ok() && removed.code() != Code::kNotFound) return removed;
  return r.status();
}

Status RestoreOrBoot(CommandContext& ctx, VmHost& host, const VmSpec& spec, VmRecord& vm,
                     RestoredVm* restored) {
  if (ctx.services.restore_templates) {
    Result<RestoredVm> r = host.CreateFromTemplate(spec);
    if (r.ok()) {
      *restored = std::move(r).value();
      vm.made = "template";
      return Status::Ok();
    }
    const Code code = r.status().code();
    if (code == Code::kLimitExceeded || code == Code::kInvalidArgument || code == Code::kConflict ||
        code == Code::kCancelled) {
      return r.status();
    }
    if (code != Code::kNotFound) {
      // A template that cannot be restored is removed, so the server makes it again (the
      // template keeper) rather than every `new` trying it first. Only that host's: each
      // host keeps its own.
      LogWarn("new: booting instead of restoring the template of " + VmShapeKey(ShapeOf(spec)) +
              (spec.host.empty() ? "" : " on host " + spec.host) + ": " + r.status().ToString() +
              "; the template is removed");
      VmHost* holder = ctx.services.hosts != nullptr && !spec.host.empty()
                           ? ctx.services.hosts->member(spec.host)
                           : nullptr;
      Status removed = (holder != nullptr ? *holder : host).RemoveTemplate(ShapeOf(spec));
      if (!removed.ok() && removed.code() != Code::kNotFound) {
        LogWarn("new: removing the template of " + VmShapeKey(ShapeOf(spec)) + ": " +
                removed.ToString());
      }
    }
  }
  vm.made = "boot";
  return host.Create(spec);
}

}  // namespace

Status MakeVmOnHost(CommandContext& ctx, VmHost& host, const VmSpec& spec, VmRecord& vm,
                    RestoredVm* restored) {
  if (vm.made == "pool") {
    Result<RestoredVm> r = ReidentifyPooled(ctx, host, spec, vm);
    if (r.ok()) {
      *restored = std::move(r).value();
      return Status::Ok();
    }
    // Destroyed: made below under the same id, with a host key of its own (not the pooled
    // VM's). A pooled VM that could not be removed stands in the way (Conflict) and the `new`
    // fails; reconcile removes it later.
  }
  VmSpec own = spec;
  if (vm.made == "pool") {
    own.ssh_host_key.clear();
    own.ssh_host_key_pub.clear();
  }
  Status st = RestoreOrBoot(ctx, host, own, vm, restored);
  if (st.code() == Code::kLimitExceeded && ctx.services.pool != nullptr &&
      ctx.services.pool->GiveWay(own.memory_mib, own.host) > 0) {
    st = RestoreOrBoot(ctx, host, own, vm, restored);
  }
  return st;
}

// Makes a VM restored from a template its own inside (hostname, host key, machine-id, RNG,
// MAC and clock from its seed and the host: vmhost/guest/identity.h), then takes only its
// new host key from here on. With `has_host_key` (a pooled VM), the guest has restored's key
// already: none is sent and the connection's pin stands.
Status ApplyRestoredIdentity(CommandContext& ctx, GuestControl& guests, const VmRecord& vm,
                             const RestoredVm& restored, bool has_host_key) {
  // Template clones and pooled VMs have a root process waiting (TemplateKeeper, VmPool), and
  // keep it; a pooled VM took the rest of its identity when it was pooled (VmPool::Fill). A
  // live copy has its source's RNG state, machine-id and files but for what its seed says.
  // So each of them (the only VMs given an identity here) takes a hand-out when its seed
  // holds nothing but the name and key (no seed read).
  WARREN_ASSIGN_OR_RETURN(
      GuestIdentity identity,
      RestoredGuestIdentity(restored, vm.name,
                            /*prepared=*/vm.made == "pool" || vm.made == "template",
                            /*handout=*/true, /*pooled=*/vm.made == "pool"));
  if (has_host_key) {
    identity.host_key.clear();
    identity.host_key_pub.clear();
  }
  // A live copy of a VM made from a template or the pool has its waiter too.
  identity.try_waiter = vm.made == "live-copy";
  identity.port = restored.identity_port;
  identity.slowdown = GuestSlowdownNow(ctx.services);
  const auto left = std::chrono::milliseconds(ctx.services.ready_timeout_ms);
  Result<GuestIdentityReport> report = ApplyGuestIdentity(guests, vm.id, identity, left);
  if (!report.ok()) {
    return report.status().Annotate("giving " + vm.name + " its identity");
  }
  if (!restored.host_key_pub.empty() && !has_host_key) {
    WARREN_RETURN_IF_ERROR(guests.RepinHostKey(vm.id, restored.host_key_pub));
  }
  // The guest's control sshd (one per connection) read its SetEnv lines when the connection
  // opened, before the seed's env was applied: the VM's env reaches commands from the next
  // connection on, so that one starts now.
  if (!vm.env.empty()) guests.Disconnect(vm.id);
  return Status::Ok();  // ApplyGuestIdentity logged what the guest reported
}

Status FinishNewVm(CommandContext& ctx, VmHost& host, GuestControl& guests, VmRecord& vm,
                   const char* verb, std::chrono::steady_clock::time_point started,
                   const RestoredVm* restored) {
  // A restored VM (pool, template, live copy) runs already: its identity is the first thing
  // asked of it, and the wait for its connection. A booted one is waited for first.
  if (restored == nullptr) {
    if (Status st = AwaitGuestReady(ctx, host, guests, vm); !st.ok()) {
      AbandonVm(ctx, vm, /*domain_made=*/true, verb);
      return st;
    }
  }
  // One from the pool took it already, while its host wrote its seed (ReidentifyPooled).
  if (restored != nullptr && vm.made != "pool") {
    if (Status st = ApplyRestoredIdentity(ctx, guests, vm, *restored, /*has_host_key=*/false);
        !st.ok()) {
      AbandonVm(ctx, vm, /*domain_made=*/true, verb);
      return st;
    }
  }
  vm.made_ms = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - started)
                                        .count());
  Status ready = ctx.store().UpdateVm(vm.id, [&vm](VmRecord& r) {
    r.phase = VmPhase::kReady;
    r.made = vm.made;
    r.made_ms = vm.made_ms;
    return Status::Ok();
  });
  if (!ready.ok()) {
    // Removed meanwhile (`rm` from another session), or the store failed: either way
    // this VM is not the caller's to keep.
    AbandonVm(ctx, vm, /*domain_made=*/true, verb);
    return ready.Annotate("recording " + vm.name + " as ready");
  }
  vm.phase = VmPhase::kReady;
  return Status::Ok();
}

Status RecordNewVm(CommandContext& ctx, VmRecord& vm) {
  // The record is what holds the owner's quota (and a sandbox's reservation of the host):
  // checked and written under their locks.
  UserQuotaLock quota(vm.owner);
  WARREN_RETURN_IF_ERROR(CheckUserQuota(ctx, vm));
  std::optional<SandboxRoomLock> room;
  if (IsSandbox(vm)) {
    room.emplace();
    WARREN_RETURN_IF_ERROR(CheckSandboxRoomFor(ctx, vm));
  }
  const bool generated = vm.name.empty();
  const bool pooled = vm.made == "pool" && !vm.id.empty();
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    if (generated) {
      vm.name = IsSandbox(vm) ? NewSandboxName() : NewVmName();
      if (IsReservedLoginName(ctx.store(), vm.name)) continue;
    }
    if (!pooled) vm.id = NewVmId();
    Status st = ctx.store().CreateVm(vm);
    if (st.ok()) return st;
    if (st.code() != Code::kConflict || !generated) return st;
  }
  return Conflict("could not find a free VM name; give one with --name");
}

Status AwaitGuestReady(CommandContext& ctx, VmHost& host, GuestControl& guests,
                       const VmRecord& vm) {
  const auto started = std::chrono::steady_clock::now();
  const auto ready_timeout = std::chrono::milliseconds(ctx.services.ready_timeout_ms);
  auto allowed = ready_timeout;
  auto deadline = started + allowed;
  bool stretched = false;
  std::shared_ptr<CancelSignal> cancel = ctx.session.cancel;
  if (cancel == nullptr) cancel = std::make_shared<CancelSignal>();
  DiscardSink discard;
  const bool wants_network = HostEgressFor(vm.egress) == Egress::kAll;
  const GuestCommand probe{wants_network ? kGuestNetworkReadyCommand : kGuestReadyCommand, {}, ""};
  Status last = Unavailable("no answer yet");
  bool answered = false;  // the guest ran the probe (its network may not be up yet)
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0 && !stretched) {
      // Out of time: a guest booting on a busy host gets the wait stretched, once.
      stretched = true;
      allowed = StretchedBy(ready_timeout, GuestSlowdownNow(ctx.services));
      deadline = started + allowed;
      continue;
    }
    if (left <= 0) break;
    GuestStreams streams;
    streams.out = &discard;
    streams.err = &discard;
    streams.cancel = cancel;
    streams.wait_ms = static_cast<int>(left);
    Result<GuestProgress> p = guests.Exec(vm.id, probe, streams);
    if (p.ok() && p->finished && p->exit_code == 0) return Status::Ok();
    if (cancel->cancelled() || (!p.ok() && p.status().code() == Code::kCancelled)) {
      return Cancelled("cancelled while " + vm.name + " was booting; it was removed");
    }
    answered = answered || p.ok();
    if (!p.ok()) {
      last = p.status();
    } else if (wants_network && p->finished && p->exit_code == kNoDefaultRouteExit) {
      last = Unavailable("its network device is not up yet (no IPv4 default route)");
    } else {
      last = Unavailable("the guest's ready check did not succeed");
    }
    Result<VmInfo> info = host.Inspect(vm.id);
    if (!info.ok() && info.status().code() == Code::kNotFound) {
      return Conflict(vm.name + " was removed while it was booting");
    }
    if (info.ok() && info->state != VmState::kRunning) {
      return Unavailable(vm.name + " " + std::string(VmStateName(info->state)) +
                         " while booting; it was removed." + ConsoleTail(host, vm));
    }
    left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
               .count();
    if (left <= 0) continue;  // (stretched above, or given up)
    if (cancel->WaitFor(static_cast<int>(std::min<int64_t>(left, kReadyPollMs)))) {
      return Cancelled("cancelled while " + vm.name + " was booting; it was removed");
    }
  }
  return Timeout(vm.name + (answered ? " was not ready within " : " did not answer within ") +
                 std::to_string(allowed.count() / 1000) + " s (last: " + last.message() +
                 "); it was removed." + ConsoleTail(host, vm));
}

void AbandonVm(CommandContext& ctx, const VmRecord& vm, bool domain_made, const char* verb) {
  if (ctx.services.guests != nullptr) ctx.services.guests->Disconnect(vm.id);
  if (domain_made) {
    Status st = ctx.services.vms->Destroy(vm.id);
    if (!st.ok() && st.code() != Code::kNotFound) {
      LogError(std::string(verb) + ": could not remove the domain of failed VM " +
               LogQuote(vm.name) + " (" + vm.id + "): " + LogQuote(st.ToString()) +
               "; reconcile will retry");
      return;
    }
  }
  Status st = ctx.store().DeleteVm(vm.id, ctx.services.clock->NowUnixMs());
  if (!st.ok() && st.code() != Code::kNotFound) {
    LogError(std::string(verb) + ": could not delete the record of failed VM " + LogQuote(vm.name) +
             " (" + vm.id + "): " + LogQuote(st.ToString()));
  }
}

}  // namespace warren
