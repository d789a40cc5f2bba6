// VmPool: the warm pool (serve --pool). On each host that takes new VMs (vm_placement.h
// HostsForNewVms: every host of several that answers, isolates its VMs and is not drained),
// for each target shape, it keeps `size` VMs restored from that host's template of the shape
// (VmHost::CreateFromTemplate; the template keeper keeps one per pool shape), connected over their
// control connection, given a whole identity of its own, its command path run (warmed: TCG
// translates guest code per QEMU process) and paused: `new` takes one (WarmPool::Take), gives it
// its identity and resumes it, which takes a fraction of a restore. Pooled VMs have no store
// record, so they are invisible to users (ls, usage, limits); after a crash or a restart reconcile
// finds them without a record and removes them (their disks collected), and the pool refills —
// nothing is leaked. An idle VM whose host stops taking new VMs (drained, unreachable) is removed,
// and one that is gone (a reconcile after its host's libvirt came back removes what has no record)
// is forgotten. They give way first when their host runs short of memory: a refill waits until the
// host has room for the pooled VM and one more of its shape, an idle VM is destroyed when one of
// its shape no longer fits there, and `new` asks the pool to give way on its host (GiveWay) before
// it gives up for lack of memory. Its own thread, like TemplateKeeper: started after reconcile and
// the template keeper, stopped (its idle VMs destroyed) before the VM runtime it uses.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/warm_pool.h"
#include "vmhost/vm_host.h"

namespace warren {

// One shape the pool keeps: the image as given (NAME or NAME@VERSION, resolved at each check,
// so a newer image's VMs replace the older's), the resources and egress, and how many.
struct PoolTarget {
  std::string image;
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  Egress egress = Egress::kAll;
  int size = 0;
};

// "IMAGE=N" (the default shape of `new` for that image) or "IMAGE:CPUS,MEMORY,DISK[,EGRESS]=N"
// (e.g. tiny:1,256M,1G,none=2); N from 0 to 64. `defaults` gives the default shape.
Result<PoolTarget> ParsePoolTarget(std::string_view text, const VmDefaults& defaults);

struct VmPoolOptions {
  std::vector<PoolTarget> targets;
  // How often the pool looks at itself when nothing wakes it.
  std::chrono::milliseconds interval{std::chrono::seconds(5)};
  // After a refill failed, the next waits at least this long.
  std::chrono::milliseconds retry_after{std::chrono::seconds(60)};
  // Optional: the channels open on a VM's control connection. A VM is paused only once its
  // connecting command's channel has closed on both sides (up to a second): a channel the
  // paused guest never closed would keep the connection probing with keepalives it cannot
  // answer, and it would be dropped.
  std::function<int(const std::string& vm_id)> open_channels;
  // Optional: starts the endpoint setup a VM's new control connection holds back (see
  // guest::ControlSessionOptions::endpoint_setup_delay) at once, and says whether it is
  // still due or under way. A VM is paused once it is done (up to 10 s): else it would come
  // due at the hand-out, beside the VM's identity and first command.
  std::function<bool(const std::string& vm_id)> settle_endpoint;
};

class VmPool final : public WarmPool {
 public:
  // `services` (vms, guests, images, control_authorized_key, ready_timeout_ms) must outlive
  // the pool. Starts the thread.
  VmPool(Services& services, VmPoolOptions options);
  // Stops the thread (a refill under way is cut short, its VM removed) and destroys the idle
  // VMs.
  ~VmPool() override;

  std::optional<PooledVm> Take(const VmShape& shape, const std::string& host) override;
  void PutBack(const VmShape& shape, const std::string& host, PooledVm vm) override;
  int GiveWay(int64_t memory_mib, const std::string& host) override;
  std::vector<std::string> HostsWithIdle(const VmShape& shape) override;

  // The shapes the pool keeps now (images resolved; a target whose image does not resolve
  // is left out), for the template keeper.
  static std::vector<VmShape> Shapes(Services& services, const std::vector<PoolTarget>& targets);
  // The shape of one target now; nullopt when its image does not resolve.
  static std::optional<VmShape> ShapeFor(Services& services, const PoolTarget& target);
  // Idle VMs per host and shape (PoolKey), for logs and tests.
  std::map<std::string, int> Idle();
  // "SHAPE" (VmShapeKey) with no HostSet, else "HOST/SHAPE".
  static std::string PoolKey(const std::string& host, const VmShape& shape);

 private:
  struct Wanted {
    std::string host;
    VmShape shape;
    int size = 0;
  };
  // Where idle VMs wait: a host ("" without a HostSet) and a shape (VmShapeKey).
  struct Slot {
    std::string host;
    std::string shape;
    auto operator<=>(const Slot&) const = default;
  };
  static Slot SlotOf(const std::string& host, const VmShape& shape) {
    return {host, VmShapeKey(shape)};
  }
  static std::string KeyText(const Slot& slot);
  void Loop();
  // One pass: drops gone, stale and crowding VMs, then refills one VM where one is missing.
  // True when it made one (the loop goes on at once).
  bool Check();
  std::vector<Wanted> Resolve();
  // Forgets idle VMs their host no longer has.
  void ForgetGone();
  // Memory `host` could give a new VM now; INT64_MAX when it does not say.
  int64_t AvailableMib(const std::string& host);
  // Restores, connects and pauses one VM of `shape` on `host`.
  Result<PooledVm> Fill(const VmShape& shape, const std::string& host);
  // A filled VM's whole identity under its stand-in `name`, and its host key re-pinned.
  Status TakeOwnIdentity(const std::string& id, const std::string& name,
                         const RestoredVm& restored);
  void Remove(const std::string& id, const std::string& why);
  // Logs why a shape is not refilled ("room", "template": `detail` says more), once per
  // reason until it is refilled (the pool's thread only).
  void Waiting(const std::string& key, const std::string& reason, const std::string& detail);

  Services& services_;
  const VmPoolOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool wake_ = false;
  // Cancelled when the pool stops: a refill under way gives up at once.
  std::shared_ptr<CancelSignal> stopping_ = std::make_shared<CancelSignal>();
  std::map<Slot, std::vector<PooledVm>> idle_;  // its idle VMs, oldest first
  // Per host: after a refill there failed, the next waits (retry_after).
  std::map<std::string, std::chrono::steady_clock::time_point> next_try_;
  std::chrono::steady_clock::time_point refill_after_{};  // under mu_
  std::map<std::string, std::string> waiting_;            // PoolKey -> why it is not refilled
  std::thread thread_;
};

}  // namespace warren
