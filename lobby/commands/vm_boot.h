// The steps `new` and `cp` share when they make a VM: settle its record and spec, write the
// record first (phase "creating", with a made-up free name when none was given), let the
// server complete the spec, wait until the booted guest runs a command, record it ready,
// and undo everything when a step fails. Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"
#include "vmhost/vm_host.h"

namespace warren {

class GuestControl;

// A VM record to be made for the caller: its owner, creation time, "creating" and wanted
// running; named `name` (checked) unless it is empty, when RecordNewVm makes one up.
Result<VmRecord> PlanNewVm(const CommandContext& ctx, const std::string& name);

// The tags a command line gives a new VM (new --tag): a credential limited to a tag may give
// only that one, since a VM it makes with another would reach past its scope (integrations
// attached to the other tag, credentials limited to it), as `tag` refuses. PermissionDenied.
Status CheckGivenTags(const CommandContext& ctx, const std::vector<std::string>& tags);

// Adds the tag a tag-limited credential is held to (so it can see the VM it makes) and
// checks the count: InvalidArgument past kMaxTagsPerVm.
Status SettleNewVmTags(const CommandContext& ctx, std::vector<std::string>& tags);

// What the host is asked to make for `vm`: its image, sizes, egress, env and warren's
// control key; id and name are stand-ins until RecordAndPrepareVm settles them.
VmSpec NewVmSpec(const CommandContext& ctx, const VmRecord& vm);

// RecordNewVm (which checks the owner's limits), then settles spec's id and name and lets
// services.prepare_vm complete it.
// A failure of prepare_vm deletes the record again. `verb` ("new", "cp") is for logs.
Status RecordAndPrepareVm(CommandContext& ctx, VmRecord& vm, VmSpec& spec, const char* verb);

// Takes an idle VM of the spec's shape on its host out of the warm pool (services.pool) for
// `vm`: its id becomes vm.id and vm.made "pool" (RecordNewVm keeps the id), and its host key
// (which the guest has: the hand-out keeps it) spec's. False when none is idle there.
bool TakePooledVm(CommandContext& ctx, VmSpec& spec, VmRecord& vm);
// Gives a VM TakePooledVm took back to the pool, before anything touched it.
void PutBackPooledVm(CommandContext& ctx, const VmSpec& spec, const VmRecord& vm);

// Makes `vm`'s domain on the host. A VM taken from the pool (vm.made "pool") gets the
// spec's identity and resumes (VmHost::Reidentify); should that fail, it is destroyed and
// the VM made as without one. Else restored from the host's template of its shape when
// services.restore_templates and there is one (vm.made "template"), else booted (vm.made
// "boot"); `*restored` is filled unless booted. A template that cannot be restored
// (Unavailable: a save file this host cannot read, a restore libvirt refuses) is logged and
// removed (the template keeper makes it again) and the VM booted instead. When the host
// lacks the memory, the warm pool gives way (GiveWay) and the host is asked once more; its
// refusal is returned.
Status MakeVmOnHost(CommandContext& ctx, VmHost& host, const VmSpec& spec, VmRecord& vm,
                    RestoredVm* restored);

// The tail once the host made and started the VM: AwaitGuestReady for a booted one; for a
// VM restored (`restored` non-null: pool, template, live copy), which runs already, its own
// identity applied in the guest as its first command (which waits for its connection) and
// its host key re-pinned; then phase "ready" in the store and in `vm`, with how it was made
// (vm.made) and the time since `started` (made_ms). Any failure undoes the VM (AbandonVm, domain
// included).
Status FinishNewVm(CommandContext& ctx, VmHost& host, GuestControl& guests, VmRecord& vm,
                   const char* verb, std::chrono::steady_clock::time_point started,
                   const RestoredVm* restored = nullptr);

// Writes `vm` (phase creating) with a fresh id (or the pooled VM's it has), making up a free name
// when vm.name is empty, if its owner's limits allow one more such VM (vm_quota.h; LimitExceeded
// otherwise). Conflict when the asked-for name is taken.
Status RecordNewVm(CommandContext& ctx, VmRecord& vm);

// What a booted guest runs until it succeeds, to be called ready: `true` for a VM without a
// network device; for one with (egress "all"), a check that it has an IPv4 default route,
// that is, its NIC is up and configured (DHCP). The control port answers before that: a
// Debian guest's udev loads virtio_net from the root file system after the control sshd
// starts, and DHCP follows. Read from /proc/net/route by the shell alone (no tool the image
// might lack); exits kNoDefaultRouteExit until the route is there.
inline constexpr char kGuestReadyCommand[] = "true";
inline constexpr char kGuestNetworkReadyCommand[] =
    "while read -r _ d _; do [ \"$d\" = 00000000 ] && exit 0; done </proc/net/route; exit 3";
inline constexpr int kNoDefaultRouteExit = 3;

// Polls the guest with its ready command (above) until it succeeds, the deadline
// (services.ready_timeout_ms, stretched once by services.guest_slowdown when it runs out)
// passes, the VM dies or is removed, or the caller goes away.
Status AwaitGuestReady(CommandContext& ctx, VmHost& host, GuestControl& guests, const VmRecord& vm);

// Undoes a creation that failed: no domain (when `domain_made`), no record. Should
// destroying the domain fail, the record stays (phase "creating") for reconcile to finish.
void AbandonVm(CommandContext& ctx, const VmRecord& vm, bool domain_made, const char* verb);

// Writes a progress line to stderr unless the caller wants --json.
void Progress(CommandContext& ctx, const std::string& line);

// "1.2s".
std::string SecondsText(double seconds);

}  // namespace warren
