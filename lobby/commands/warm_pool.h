// WarmPool: what `new` sees of the warm pool (serve --pool; lobby/vm_pool.h keeps it). A
// pooled VM is restored from its shape's saved template ahead of time, connected, and paused:
// it has no record, so no user sees it, pays for it or has it counted against a limit. `new`
// takes one of its shape, gives it the caller's identity (VmHost::Reidentify, then the guest
// identity step) and records it; from Take on, the VM is the caller's to keep or destroy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vmhost/vm_host.h"

namespace warren {

// An idle pooled VM as `new` takes it.
struct PooledVm {
  std::string id;
  // The SSH host key pair the VM took when it was pooled (its own, made by its host at the
  // restore and seen by no one since): the hand-out keeps it, so the guest writes no key and
  // the connection's pin stands. A secret: never logged.
  std::string host_key, host_key_pub;
};

class WarmPool {
 public:
  virtual ~WarmPool() = default;
  // Each host that takes new VMs keeps its own pooled VMs (vm_placement.h HostsForNewVms);
  // `host` is a HostSet member's name, "" with no HostSet.
  //
  // An idle pooled VM of `shape` on `host`, taken out of the pool (refilled behind it);
  // nullopt when none is idle there.
  virtual std::optional<PooledVm> Take(const VmShape& shape, const std::string& host) = 0;
  // A VM taken but not used (the `new` was refused before it touched it): idle again.
  virtual void PutBack(const VmShape& shape, const std::string& host, PooledVm vm) = 0;
  // Makes room on `host`: destroys its idle pooled VMs until `memory_mib` more fits (or none
  // is left), and refills no further there until it does. How many went.
  virtual int GiveWay(int64_t memory_mib, const std::string& host) = 0;
  // The hosts where an idle VM of `shape` waits now (placement prefers them).
  virtual std::vector<std::string> HostsWithIdle(const VmShape& shape) = 0;
};

}  // namespace warren
