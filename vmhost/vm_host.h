// VmHost: one machine that runs warren's VMs. LibvirtHost (libvirt_host.h) is the real one;
// a host is an object with a libvirt URI from the start so one lobby can later drive
// several hosts. The fake used by tests lives in tests/fakes, never here; both pass
// tests/unit/vm_host_contract_test.cc. Implementations are thread-safe: any thread may call
// any method.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

enum class VmState { kRunning, kPaused, kStopped, kCrashed };

std::string_view VmStateName(VmState state);  // "running", "paused", "stopped", "crashed"

// What the guest may reach besides the control connection (which needs no network): kAll, a
// network device with user-mode NAT to anywhere the host's isolation rules allow
// (egress_firewall.h: never the host itself, nor private, link-local or multicast ranges);
// kNone, no network device at all. The interpreter's policies map onto these: `all` is
// kAll; `integrations` and `none` are kNone (integrations reach a guest over its control
// connection, never over a network).
enum class Egress { kAll, kNone };

std::string_view EgressName(Egress egress);  // "all", "none"

// What to build. The domain is named by `id`, never by the user's name: the name is a
// label (the store's, mirrored into the domain's metadata and the guest's hostname), so a
// rename never changes a domain's identity and a copied domain never clashes.
struct VmSpec {
  std::string id;     // warren's stable id, [a-z0-9]{8,32}; the domain is "warren-<id>"
  std::string image;  // "NAME@VERSION": VMs keep booting from the version they were made with
  int cpus = 2;
  int64_t memory_mib = 2048;
  int64_t disk_gib = 10;
  // The user's VM name; empty means "use the id". A hostname label: [a-z0-9-], 1..63.
  std::string name;
  Egress egress = Egress::kAll;
  // The guest's identity, in a read-only seed disk it applies at every boot (the setup
  // script runs once, at the first). Layout: packaging/images/README.md.
  // Keys the guest's control sshd accepts for its user: warren's own control key, since
  // users reach a VM through warren, never directly. OpenSSH format, <= 64 KiB.
  std::string authorized_keys;
  std::vector<std::pair<std::string, std::string>> env;  // KEY=VALUE, no newlines
  std::string setup_script;                              // runs once at first boot, <= 10 KiB
  // The guest's SSH host key chosen by warren, so it is pinned before first contact
  // (OpenSSH private key file and its .pub line). Both or neither; a secret, never logged.
  std::string ssh_host_key;
  std::string ssh_host_key_pub;
  // Which host to make it on, when one lobby drives several (host_set.h, serve --host): the
  // interpreter places it. Empty: the default host. A single host ignores it.
  std::string host;
};

struct VmInfo {
  std::string id;
  std::string name;   // the user's name as last set (Create or Rename)
  std::string image;  // "NAME@VERSION"
  VmState state = VmState::kStopped;
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  int64_t started_at = 0;  // Unix seconds of the last start; 0 when not running
  // qcow2 files in the disk's chain above the image (1 for a VM never copied). Each `cp`
  // adds one to the source and gives the copy the same depth; see kMaxDiskLayers.
  int disk_layers = 0;
  // The host holding it, by name (serve --host NAME=URI): HostSet fills it in; a single
  // host leaves it empty.
  std::string host;
};

// A chain deeper than this is flattened (live, in the background, the VM keeps running)
// onto the image: when a Copy makes it so, and when such a VM is started.
inline constexpr int kMaxDiskLayers = 8;

// What Resize changes; 0 leaves a value as it is.
struct ResizeSpec {
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;  // only grows
};

// What a host has for VMs and what its VMs hold of it already: what CheckHostRoom admits a new
// VM (or more for one) against. Not what is free this instant alone: overlays are thin and a
// fresh guest touches little memory, so two VMs made at once would each fit in what the
// other has not used yet, and later run the host out of disk or memory.
struct HostCapacity {
  int cpu_cores = 0;                 // online CPUs; no VM gets more vCPUs than this
  int64_t memory_mib = 0;            // the host's memory less a reserve for the host itself
  int64_t memory_free_mib = 0;       // what it could give now without swapping, less the reserve
  int64_t memory_committed_mib = 0;  // every running or paused VM's memory, touched or not
  int64_t disk_free_bytes = 0;       // free now where the VMs' disks live
  int64_t disk_committed_bytes = 0;  // what this host's VMs' disks may still grow by
};

// What is asked of a host beyond what it holds: a new VM, a resize, a start.
struct HostDemand {
  int cpus = 0;            // the VM's vCPUs; 0 when they do not change
  int64_t memory_mib = 0;  // memory to commit
  int64_t disk_gib = 0;    // disk to commit
};

// The host-level admission rule, the one place it is written: InvalidArgument for more vCPUs
// than the host has cores (a VM that can never run well here); LimitExceeded when the memory
// does not fit both in what is not committed and in what is free now, or the disk does not
// fit in what is free less what the existing disks may still grow by. Messages give figures.
Status CheckHostRoom(const HostCapacity& host, const HostDemand& demand);

struct ResizeOutcome {
  // CPU or memory changed for a VM that is running or paused: the new values are in its
  // definition and take effect at its next (re)start. Disk growth is always live.
  bool restart_needed = false;
  bool disk_grown = false;  // the disk device grew; a running guest's file system has not yet
};

// A VM's state changed, as the hypervisor reports it when it happens: a start, pause,
// resume, stop, crash, removal — whoever caused it (warren, the guest powering off, QEMU
// dying). `state` is the VM's state after the change (kStopped also when it was removed).
struct VmStateEvent {
  std::string id;  // warren's id (the domain "warren-<id>")
  VmState state = VmState::kStopped;
};
using VmStateListener = std::function<void(const VmStateEvent&)>;

// ---- Templates: a VM booted once and saved with its memory, restored instead of booted ----

// What fixes a template's devices, so that a VM restored from it is the VM a spec asks for.
struct VmShape {
  std::string image;  // "NAME@VERSION"
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  Egress egress = Egress::kAll;
  bool operator==(const VmShape&) const = default;
};
VmShape ShapeOf(const VmSpec& spec);
// "tiny@20261202-1c-256m-1g-none": a file name (the image's name and version are [a-z0-9._-]).
std::string VmShapeKey(const VmShape& shape);

struct TemplateInfo {
  VmShape shape;
  std::string tag;       // the maker's own mark (warren: its guest runner's version)
  int64_t saved_at = 0;  // Unix seconds
  int64_t bytes = 0;     // the saved memory's size on disk
  std::string host;      // the host holding it, when a HostSet listed it
};

// What CreateFromTemplate made. The guest runs with the template's identity inside (hostname,
// host key, machine-id, RNG state, MAC, a clock stopped at the save) until the caller applies
// the VM's own from its seed (GuestControl::ApplyIdentity); the MAC is the NIC's new one.
struct RestoredVm {
  std::string mac;  // "" when the VM has no NIC
  // The guest's new SSH host key (.pub line) in its seed: the spec's, or one the host made
  // when the spec had none. Once applied, the guest answers with it (re-pin it).
  std::string host_key_pub;
  // Reidentify, CreateFromTemplate and CopyLive: the private half of that key (a secret:
  // never logged), and whether the seed holds more than the guest has already but its name
  // and key (env or a setup script), which it must then read from the seed.
  std::string host_key;
  bool seed_has_more = false;
  // The VM has the warren.identity port (a domain defined before it had none), on which a
  // guest's waiting root process takes the identity without the SSH connection
  // (GuestIdentity::port).
  bool identity_port = false;
  int64_t restore_ms = 0;
};

// RestoredVm::seed_has_more for a VM made from `spec`: its seed holds env or a setup script.
inline bool SeedHasMoreThanIdentity(const VmSpec& spec) {
  return !spec.env.empty() || !spec.setup_script.empty();
}

// What MigrateTo did, for the command's output and the log.
struct MigrationReport {
  bool live = false;          // the VM ran (or was paused) and moved with its memory
  int64_t total_ms = 0;       // from the first check to the VM being the target's
  int64_t disk_ms = 0;        // copying its disk layers through the storage API
  int64_t downtime_ms = -1;   // live: how long the guest did not run (paused for the last
                              // layer and the memory's last pass); -1 when not known
  int64_t disk_bytes = 0;     // what went through the storage API
  int64_t memory_bytes = -1;  // live: what libvirt reports it sent (virDomainGetJobStats)
};

class VmHost {
 public:
  virtual ~VmHost() = default;

  // "qemu:///system", "test:///default", "fake://"...
  virtual std::string uri() const = 0;

  // What the host has and what its VMs hold (see HostCapacity).
  virtual Result<HostCapacity> Capacity() = 0;

  // Makes the disk and the domain and starts it. Conflict if the id exists; InvalidArgument
  // or LimitExceeded when the host has no room (CheckHostRoom); on failure nothing is left
  // behind.
  virtual Status Create(const VmSpec& spec) = 0;
  // State changes. NotFound for an unknown id; Conflict when the VM is in the wrong state
  // (starting a running VM, pausing a stopped one...). Start is refused (LimitExceeded) when
  // the VM's memory no longer fits the host (CheckHostRoom).
  virtual Status Start(std::string_view id) = 0;    // stopped -> running
  virtual Status Stop(std::string_view id) = 0;     // running|paused|crashed -> stopped, disk kept
  virtual Status Pause(std::string_view id) = 0;    // running -> paused, memory kept
  virtual Status Resume(std::string_view id) = 0;   // paused -> running
  virtual Status Restart(std::string_view id) = 0;  // running -> running, a fresh boot
  // Removes the domain and its disk whatever the state. NotFound if absent.
  virtual Status Destroy(std::string_view id) = 0;
  // Relabels a VM in any state (running included) without touching the guest: the new name
  // shows in Inspect/List at once; the guest takes it as its hostname at its next boot.
  virtual Status Rename(std::string_view id, std::string_view name) = 0;

  // Makes VM `spec.id` from a copy of `source_id`'s disk, without copying bytes: the
  // source's current disk becomes a shared read-only layer under a fresh overlay for each
  // of them, so the time does not depend on the disk's size. A running or paused source
  // keeps running (an atomic disk-only snapshot moves it onto its new overlay; the caller
  // syncs the guest first); a stopped one is simply redefined onto its new overlay. The
  // copy gets `spec`'s identity (name, seed, egress, resources) and is started. NotFound
  // for an unknown source, Conflict if spec.id exists, LimitExceeded when the host lacks
  // room; on failure the copy leaves nothing behind and the source is unharmed. Layers are
  // deleted only when no VM's chain uses them any more.
  virtual Status Copy(std::string_view source_id, const VmSpec& spec) = 0;
  // Grows the disk (live for a running VM) and sets CPUs and memory (in the definition;
  // live values change at the next start). InvalidArgument for a smaller disk or values out
  // of range or more vCPUs than the host's cores, LimitExceeded beyond what the host has
  // (CheckHostRoom); checked before anything changes.
  virtual Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) = 0;
  // Deletes disk layers no VM uses (left by a copy or create cut short, or freed by a
  // finished flattening). Returns how many went. Destroy does this too.
  virtual Result<int> RemoveUnusedDisks() = 0;
  // Gives the VM its network device (kAll) or takes it away (kNone): in the persistent
  // definition always, and on a running or paused VM live too (a hot-plug or unplug of the
  // NIC; the guest sees a link appear or vanish). Returns whether the running VM changed
  // live; Ok, and false, when it already is as asked. NotFound for an unknown id.
  virtual Result<bool> SetNetwork(std::string_view id, Egress egress) = 0;

  virtual Result<VmInfo> Inspect(std::string_view id) = 0;
  // Every VM this host holds, for reconciling the store with the hypervisor.
  virtual Result<std::vector<VmInfo>> List() = 0;
  // The last `max_lines` lines of the VM's console log.
  virtual Result<std::string> Console(std::string_view id, int max_lines) = 0;

  // Saves running VM `id` as the template of its shape, marked `tag`, and removes the VM: its
  // memory goes to the template's save file and its disk becomes the template's read-only base.
  // The caller has let the guest settle and dropped its control connection (a connection open
  // at the save is lost in every clone). Replaces an older template of the same shape, whose
  // base stays while VMs stand on it. NotFound, Conflict unless it runs; on failure the VM is
  // removed all the same and no template is half-made.
  virtual Status SaveTemplate(std::string_view id, std::string_view tag) = 0;
  // The templates this host holds, one per shape.
  virtual Result<std::vector<TemplateInfo>> Templates() = 0;
  // Removes the template of `shape`; its base stays while VMs stand on it. NotFound.
  virtual Status RemoveTemplate(const VmShape& shape) = 0;
  // As Create, but restored, running, from the template of the spec's shape instead of
  // booted: the VM gets its own id, name, disk (an overlay on the template's base), seed, files
  // and MAC. NotFound when there is no such template; Unavailable when it cannot be restored
  // (a save file this host cannot read, a restore libvirt refuses: boot instead); room as
  // Create. On failure nothing is left behind.
  virtual Result<RestoredVm> CreateFromTemplate(const VmSpec& spec) = 0;
  // Gives VM `spec.id` — restored from a template under a stand-in name and kept paused (a
  // warm pool's VM) — `spec`'s identity, and resumes it: its name (title, metadata, the next
  // boot's command line) and a seed rewritten in place with spec's hostname, keys, env, setup
  // script and a new SSH host key (spec's, or one made here). The shape must be the VM's.
  // The guest takes the seed when told (vmhost/guest/identity.h). NotFound; Conflict unless
  // it is paused or running; InvalidArgument for another shape. On failure the VM is left
  // for the caller to remove.
  //
  // `meanwhile` (may be empty) is the caller's part once the VM runs: the guest's identity.
  // When the guest has nothing to read from the new seed (RestoredVm::seed_has_more false:
  // it gets its name and key in the request), it runs while the host writes that seed and
  // renames the domain, on another thread; else after. Reidentify returns when both are done:
  // `meanwhile`'s failure is its failure.
  using WhileReidentified = std::function<Status(const RestoredVm&)>;
  virtual Result<RestoredVm> Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) = 0;
  // As Copy, but of a running VM with its memory: an external snapshot of the source's
  // memory and disk (the source pauses for about half a second and runs on, on a new
  // overlay) is restored as `spec`'s VM, running the source's processes, under its own id,
  // name, overlay, seed (with a new SSH host key: spec's, or one made here), files and MAC;
  // the guest takes its identity when told (vmhost/guest/identity.h). The memory file is
  // removed once restored. Conflict unless the source runs; otherwise as Copy (nothing left
  // behind on failure, the source unharmed).
  virtual Result<RestoredVm> CopyLive(std::string_view source_id, const VmSpec& spec) = 0;

  // Moves VM `id`, with its disk, to `target` (another host of the same kind driven by this
  // lobby; InvalidArgument for `*this` or a host this one cannot move a VM to). A running or
  // paused VM moves live: its memory with it, its processes and connections go on there, and
  // it runs (or stays paused) there as it did here; a stopped one moves cold (its disk and
  // definition). Afterwards the VM is target's alone: its domain (persistent, autostarted as
  // it was), its files (seed, console log, control port) and a disk chain of its own over
  // target's copy of its image there; nothing of it here (its files, and the layers no other
  // VM here uses). Before anything moves: NotFound for an unknown id, Conflict when target
  // has a VM of that id or the VM is crashed, LimitExceeded (or InvalidArgument) when target
  // has no room for it (CheckHostRoom: its vCPUs, its memory if it runs, its whole disk),
  // Unavailable when either host does not answer. Whether target may take it (drained,
  // isolated) is the caller's policy, not checked here. On failure (refused, or cut short
  // half-way) the VM is here as it was, running if it ran, and nothing of it is left on target
  // (an image version uploaded there stays: it is the host's, not the VM's).
  virtual Result<MigrationReport> MigrateTo(std::string_view id, VmHost& target) = 0;

  // From now on, calls `listener` for every state change of this host's VMs, on a thread of
  // the host's own, one event at a time and in the order they happened (one listener; a later
  // call replaces it, an empty one stops the calls). Usage metering rests on it, so no change
  // may go unreported: when the host loses its connection to the hypervisor and regains it,
  // it reports every VM's current state once (a change may have happened meanwhile). Only
  // warren's own domains are reported. The listener must not block for long.
  virtual Status WatchStates(VmStateListener listener) = 0;
};

// Checks a VmSpec before any host work: id charset and length, cpus 1..64,
// memory 128 MiB..256 GiB, disk 1..2048 GiB, name, env and seed sizes. InvalidArgument
// with the field named.
Status ValidateVmSpec(const VmSpec& spec);

// Checks a ResizeSpec's ranges (as ValidateVmSpec): InvalidArgument with the field named,
// also when it asks for no change at all.
Status ValidateResizeSpec(const ResizeSpec& spec);

// A VM name as the hypervisor layer accepts it: the one rule for VM names
// (lobby/base/vm_name.h CheckVmName), which also makes it a valid hostname label.
Status ValidateVmName(std::string_view name);

}  // namespace warren
