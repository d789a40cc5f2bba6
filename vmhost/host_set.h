// HostSet: several VM hosts under one lobby (serve --host NAME=URI…) seen as one VmHost, so
// the interpreter, reconcile and the usage meter keep talking to one object. It routes: a
// call about a VM goes to the host that holds it (remembered from every create, copy and
// listing; else found by asking each host), a new VM goes to the host its spec names (the
// interpreter chooses: placement is policy, lobby/commands/vm_placement.h), a copy to its
// source's host (the disk chain is there). It decides nothing else: which hosts are drained
// is the store's, and each host checks its own room.
//
// A host that does not answer (its libvirt connection lost; LibvirtHost is reconnecting) is
// "unreachable": calls about its VMs fail Unavailable naming it, List and Templates leave it
// out, Statuses says so and why. Nothing of it is forgotten meanwhile.
//
// The members are not owned and must outlive the set. Thread-safe, as every VmHost: the
// location cache has its own mutex, held briefly and never while calling a member.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vmhost/vm_host.h"

namespace warren {

struct HostMember {
  std::string name;        // lobby/base/host_name.h
  VmHost* host = nullptr;  // not owned
  std::string accel;       // "kvm" or "tcg", as probed on that host; "" when not known
  // Whether the host's isolation rules are in place for its VMs (egress_firewall.h);
  // placement refuses a host without them. Empty: not known, taken as no.
  std::function<bool()> isolated;
  // The image versions ("NAME@VERSION") the host can boot without a copy; optional.
  std::function<Result<std::vector<std::string>>()> images;
};

// One host as Statuses found it.
struct HostStatus {
  std::string name;
  std::string uri;
  std::string accel;
  bool reachable = false;
  std::string error;  // why not, when unreachable
  bool isolated = false;
  HostCapacity capacity;            // when reachable
  int vms = 0;                      // warren's VMs it holds, when reachable
  std::vector<std::string> images;  // what HostMember::images said, when reachable
};

class HostSet final : public VmHost {
 public:
  // At least one member, names valid and distinct (InvalidArgument otherwise). The first is
  // the default host: a spec that names none goes there.
  static Result<std::unique_ptr<HostSet>> Make(std::vector<HostMember> members);

  const std::string& default_host() const { return members_.front().name; }
  std::vector<std::string> names() const;
  // The member called `name`; null when there is none.
  VmHost* member(std::string_view name) const;
  // Each host asked in turn, in the order given at Make: its capacity, and with `contents`
  // also its VMs and image versions (a listing each: placement needs only the room).
  std::vector<HostStatus> Statuses(bool contents = true);
  // The room of host `name`. NotFound for an unknown name; the host's error (Unavailable)
  // when it does not answer.
  Result<HostCapacity> CapacityOf(std::string_view name);
  // The name of the host holding VM `id`. NotFound when no host that answers has it
  // (Unavailable, naming them, when some do not answer: it may be there). A single host is
  // not asked (the only one it can be on): the caller's next call to it says NotFound.
  Result<std::string> HostOf(std::string_view id);
  // Moves VM `id` from the host holding it to host `host_name` (VmHost::MigrateTo, whose
  // contract it keeps), and remembers it there. NotFound for an unknown host or VM;
  // InvalidArgument when it is on that host already. While it moves, and after, the state
  // changes its old host reports for it (its domain stopped and undefined there) are not
  // passed to the WatchStates listener: the VM did not stop.
  Result<MigrationReport> Migrate(std::string_view id, std::string_view host_name);
  // The host VM `id` is being moved to (Migrate has not returned); "" when it is not moving.
  std::string MovingTo(std::string_view id) const;
  // Waits until VM `id` is not being moved, or until `deadline`. A dial to a VM stopped at a
  // move's switchover waits with these rather than fail (lobby/vm_hosts.cc DialControl).
  void AwaitMove(std::string_view id, std::chrono::steady_clock::time_point deadline);

  // ---- VmHost. A single host's set behaves exactly as that host, errors included.
  std::string uri() const override;
  // The fleet's: the cores of the largest host, memory and disk summed over the hosts that
  // answer. Placement asks each host's own (CapacityOf); this is for what wants a total.
  Result<HostCapacity> Capacity() override;
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  // On the source's host; InvalidArgument when spec.host names another.
  Status Copy(std::string_view source_id, const VmSpec& spec) override;
  Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) override;
  // Summed over the hosts that answer.
  Result<int> RemoveUnusedDisks() override;
  Result<bool> SetNetwork(std::string_view id, Egress egress) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  // Every VM of every host that answers, each with its host's name. A host that does not is
  // left out (its VMs are not gone: reconcile runs per host, on the member itself).
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;
  Status SaveTemplate(std::string_view id, std::string_view tag) override;
  // The templates of every host that answers, each with its host's name.
  Result<std::vector<TemplateInfo>> Templates() override;
  // From every host that holds one of that shape; NotFound when none does.
  Status RemoveTemplate(const VmShape& shape) override;
  Result<RestoredVm> CreateFromTemplate(const VmSpec& spec) override;
  Result<RestoredVm> Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) override;
  // On the source's host, as Copy.
  Result<RestoredVm> CopyLive(std::string_view source_id, const VmSpec& spec) override;
  // The listener is given every member's events (each from that member's own thread), but
  // a member's "stopped" for a VM another member holds now or is taking (Migrate).
  Status WatchStates(VmStateListener listener) override;
  // Migrate's, with the target given as a member's VmHost.
  Result<MigrationReport> MigrateTo(std::string_view id, VmHost& target) override;

 private:
  explicit HostSet(std::vector<HostMember> members) : members_(std::move(members)) {}

  // The member holding VM `id` (see HostOf).
  Result<const HostMember*> Route(std::string_view id);
  // The member a new VM's spec names: the default one when it names none.
  Result<const HostMember*> Target(const VmSpec& spec) const;
  // The member for a copy of `source_id`: the source's; spec.host must agree.
  Result<const HostMember*> CopyTarget(std::string_view source_id, const VmSpec& spec);
  // Runs `call` on the member holding `id`; its Unavailable errors name the host.
  template <typename R>
  R OnVm(std::string_view id, const std::function<R(VmHost&)>& call);
  Status Named(const HostMember& m, Status st) const;
  void Remember(std::string_view id, const std::string& host);
  void Forget(std::string_view id);

  const std::vector<HostMember> members_;
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> where_;  // VM id -> host name
  // VMs being moved: id -> the host they leave (its "stopped" events are not passed on).
  std::map<std::string, std::string, std::less<>> leaving_;
  struct Move {
    int count = 0;   // moves of the VM under way (the second waits for the first's VM lock)
    std::string to;  // the latest one's target
  };
  std::map<std::string, Move, std::less<>> moving_;  // VM id -> its moves (MovingTo)
  std::condition_variable moved_;
};

}  // namespace warren
