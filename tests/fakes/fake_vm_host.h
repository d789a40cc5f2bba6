// FakeVmHost: an in-memory VmHost for tests of everything above vmhost. It keeps the same
// state machine as the real host (the contract test runs against both) and can be told to
// fail the next operation. WatchStates delivers as LibvirtHost does (VmStateDelivery: its
// own thread, in order); FlushStateEvents waits for it, and a test can change a VM's state
// behind warren's back or have the host report every state as after a reconnect.
// Optionally persistent (PersistIn): its state lives in a data directory, as libvirt's
// persistent domains outlive warren, so a test can kill the process and start it again over
// the same host (tests/crash). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "lobby/base/clock.h"
#include "vmhost/vm_host.h"
#include "vmhost/vm_state_delivery.h"

namespace warren {

class FakeVmHost final : public VmHost {
 public:
  explicit FakeVmHost(const Clock& clock = SystemClock::Get()) : clock_(clock) {}

  std::string uri() const override { return "fake://"; }
  Result<HostCapacity> Capacity() override;
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;
  Status Copy(std::string_view source_id, const VmSpec& spec) override;
  Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) override;
  Result<int> RemoveUnusedDisks() override;
  // Sets the spec's egress (SpecOf shows it); live when the VM runs or is paused.
  Result<bool> SetNetwork(std::string_view id, Egress egress) override;
  Status WatchStates(VmStateListener listener) override;
  // Templates as the real host keeps them, in memory: a saved VM's shape and tag; a clone
  // gets a fresh MAC when it has a NIC. The VM (or clone) of a template is made "from_template"
  // (WasRestored).
  Status SaveTemplate(std::string_view id, std::string_view tag) override;
  Result<std::vector<TemplateInfo>> Templates() override;
  Status RemoveTemplate(const VmShape& shape) override;
  Result<RestoredVm> CreateFromTemplate(const VmSpec& spec) override;
  Result<RestoredVm> Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) override;
  Result<RestoredVm> ReidentifyLocked(const VmSpec& spec);
  Result<RestoredVm> CopyLive(std::string_view source_id, const VmSpec& spec) override;
  // To another FakeVmHost (InvalidArgument otherwise, or for itself): the VM, in its state,
  // leaves this host and is the target's, its files made there first (PersistIn) and removed
  // here after. The target's room is checked as the real host checks it (its vCPUs, its
  // memory when running or paused, its whole disk); FailNext fails it, changing nothing.
  // Reported as the real host reports it: stopped here (undefined), its state there.
  Result<MigrationReport> MigrateTo(std::string_view id, VmHost& target) override;
  // Whether `id` was made by CreateFromTemplate.
  bool WasRestored(std::string_view id);
  // Whether `id` was made by CopyLive.
  bool WasLiveCopied(std::string_view id);

  // The next mutating call fails with `status` and changes nothing.
  void FailNext(Status status);
  // What the host has for VMs: `memory_mib` of memory, which running and paused VMs hold, and
  // `disk_gib` of disk, which every VM's disk holds at its full size; Create, Copy, Resize and
  // Start are admitted by CheckHostRoom as on the real host. Default: unlimited.
  void SetHostLimits(int64_t memory_mib, int64_t disk_gib);
  // The host's CPU cores (default 64): no VM may have more vCPUs.
  void SetHostCores(int cores);
  // Each Create takes this long (a boot on a busy host) before it looks at anything, holding no
  // lock meanwhile. Default: none.
  void SetCreateDelay(std::chrono::milliseconds delay);
  // The spec of the last Create or Copy of `id` (seed identity included), for tests.
  std::optional<VmSpec> SpecOf(std::string_view id);

  // What the hypervisor does without warren: the guest powers off (kStopped), QEMU dies
  // (kCrashed), something pauses or resumes it. Reported to the WatchStates listener.
  // NotFound for an unknown id.
  Status SimulateOutOfBand(std::string_view id, VmState state);
  // What a reconnect to the hypervisor ends with: every VM's current state, reported once.
  void SimulateReconnect();
  // Stop and Restart press the power button before the VM is off (step "stop:asked",
  // "restart:asked"), as the real host's ACPI shutdown does; a process killed there leaves a
  // guest that powers off by itself a little later. This is that later: every such VM is
  // now stopped (reported). For crash tests, after the next start.
  void SettleShutdowns();
  // Waits until every state change so far has reached the listener.
  void FlushStateEvents();
  // How often Inspect and List were called: what a command asked the hypervisor.
  int InspectCalls() const { return inspect_calls_; }
  int ListCalls() const { return list_calls_; }

  // ---- Persistence. With PersistIn(dir) the host's state lives in dir/fake-host.json,
  // written through (atomically) after every change, and each VM, template and live copy
  // has small files where the real host keeps its own: vms/<id>/{seed.img,console.log,
  // control.sock} (a regular file stands for the socket), disks/<id>.qcow2,
  // templates/<shape key>.save, tmp/live-<id>.save while a live copy is restored. A change
  // makes its files before the VM is recorded and removes them after it is forgotten, so a
  // process killed in between leaves files no VM owns, which RemoveUnusedDisks collects
  // (as the real host's collection does). Loads what an earlier process left there. Call it
  // first, before any other method; Internal when the state cannot be read.
  Status PersistIn(const std::string& dir);
  // Called at each step of every change, under the host's lock: "create:before",
  // "create:files", "create:after"... with the VM's id (or the template's shape key). The
  // hook must not call the host; a crash test prints the step and may SIGKILL the process
  // there. Steps with "before" come before anything changed, "after" once it is persisted.
  using StepHook = std::function<void(std::string_view step, std::string_view what)>;
  void SetStepHook(StepHook hook);
  // The definition of `id`: what its next boot takes (a resize of a running VM changes it,
  // not VmInfo's live figures), and its label and NIC.
  struct Definition {
    std::string name;
    int cpus = 0;
    int64_t memory_mib = 0;
    int64_t disk_gib = 0;
    Egress egress = Egress::kAll;
  };
  std::optional<Definition> DefinitionOf(std::string_view id);

 private:
  struct Vm {
    VmInfo info;
    std::string console;
    VmSpec spec;
    // The definition's values, which the live ones take at the next boot.
    int config_cpus = 0;
    int64_t config_memory_mib = 0;
    std::string mac;             // restored VMs' (CreateFromTemplate, CopyLive)
    bool shutting_down = false;  // told to power off, not yet off (SettleShutdowns)
  };
  std::string NextMac();  // with mu_ held
  HostCapacity CapacityLocked() const;
  Status CheckRoom(const HostDemand& demand) const {
    return CheckHostRoom(CapacityLocked(), demand);
  }
  // A VM just made from `spec`, running: what Create and Copy add.
  Vm Booted(const VmSpec& spec, const std::string& image, int64_t disk_gib, int disk_layers) const;
  // A copy of `source` as `spec`, made running: Copy's and CopyLive's disk fork.
  Vm Forked(Vm& source, const VmSpec& spec) const;
  // Runs a transition under the lock, honouring FailNext.
  Status Transition(std::string_view id, std::initializer_list<VmState> from, VmState to,
                    const char* verb);
  std::optional<Status> TakeFailure();
  // Queues a state change for the listener, if one watches. Call with mu_ held (the queue
  // never blocks), so changes are queued in the order they happen.
  void Emit(std::string_view id, VmState state);
  // The delivery, once WatchStates made it (under mu_); it outlives every other member.
  VmStateDelivery* Delivery();
  // Persistence (no-ops unless PersistIn), with mu_ held. Step calls the hook.
  void Step(const char* verb, const char* phase, std::string_view what);
  void Persist();
  void MakeVmFiles(const std::string& id);
  void RemoveVmFiles(const std::string& id);
  std::string TemplateFile(const std::string& shape_key) const;
  int RemoveLeftoverFiles();

  const Clock& clock_;
  std::mutex mu_;
  std::atomic<int> inspect_calls_{0};
  std::atomic<int> list_calls_{0};
  std::map<std::string, Vm, std::less<>> vms_;
  std::optional<Status> fail_next_;
  std::map<std::string, TemplateInfo> templates_;  // by VmShapeKey
  std::set<std::string, std::less<>> restored_;
  std::set<std::string, std::less<>> live_copied_;
  int macs_made_ = 0;
  int64_t limit_memory_mib_ = INT64_MAX;
  int64_t limit_disk_gib_ = INT64_MAX;
  int cores_ = 64;
  std::atomic<int64_t> create_delay_ms_{0};
  std::string dir_;  // PersistIn's; empty: in memory only
  StepHook step_hook_;
  // Last: destroyed first, its thread stopped while what its full report reads still exists.
  std::unique_ptr<VmStateDelivery> delivery_;
};

}  // namespace warren
