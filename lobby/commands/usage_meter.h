// UsageMeter: keeps every VM's usage meter (keys/usage.h) in step with what the host reports.
// Each state change the host reports (VmHost::WatchStates: a start, pause, resume, stop,
// crash or removal, whoever caused it) moves the VM's meter at that moment; at start-up
// Resync marks every VM as the host finds it, so the time a VM ran while warren was down is
// counted once (from the mark stored before, to now). Nothing samples: a VM's running time
// is the sum of the intervals between transitions. Thread-safe.
#pragma once

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "vmhost/vm_host.h"

namespace warren {

class UsageMeter {
 public:
  UsageMeter(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // For VmHost::WatchStates: the VM runs from now on (kRunning) or does not (anything else).
  // A VM warren does not know (another warren's, one just removed) is ignored.
  void OnStateChange(const VmStateEvent& event);

  // Marks every VM in the store as the host finds it now. A VM that stopped while warren was
  // down is counted as running until now: the host does not say when it stopped. Returns the
  // first failure; the other VMs are still marked.
  Status Resync(VmHost& host);

 private:
  Store& store_;
  const Clock& clock_;
};

}  // namespace warren
