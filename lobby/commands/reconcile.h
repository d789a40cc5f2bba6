// Reconcile: brings the store and the hypervisor back into agreement when the daemon
// starts, so that warren "restarts from the store plus what libvirt reports":
//   - a record still "creating" (warren stopped in the middle of `new`): its domain, if
//     any, is destroyed and the record deleted — that VM was never handed to anyone;
//   - a record "removing" (warren stopped in the middle of `rm`): the removal is finished;
//   - a domain whose name or network device is not the record's (a `rename` or `egress`
//     cut short): made the record's; a resize recorded as pending (a `resize` cut short):
//     asked of the host again and recorded; a VM marked restarting (a `restart` cut short,
//     whose guest may be powering off still): restarted;
//   - a domain with no record (an orphan): destroyed, and logged;
//   - a record whose domain is gone: kept (the user's record is not silently dropped) and
//     logged; ls and stat show it as "missing" and rm removes it;
//   - a VM whose desired state is running or paused but whose domain is stopped or crashed:
//     started again (and paused again); desired stopped but running: stopped;
//   - job records that finished more than a day ago: dropped;
//   - disk layers no VM's chain uses (a `cp` or `new` cut short, a finished flattening):
//     deleted by the host, after the domains above are settled. A `cp` cut short is just a
//     "creating" record like an unfinished `new`; its source keeps its new overlay.
// Sandboxes whose lifetime ran out while warren was down are removed just before it
// (ExpireSandboxes, sandbox_expiry.h, called by the binary), so none is started again.
// Must run before the interpreter serves commands: a `new` in flight would look like a
// crashed one. Not thread-safe with itself; the store and host it uses are.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "keys/store.h"
#include "lobby/base/clock.h"
#include "lobby/base/status.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {

// What Reconcile did, for the daemon's log and for tests. VMs by name, orphans by id.
struct ReconcileReport {
  std::vector<std::string> unfinished_removed;
  std::vector<std::string> removals_finished;
  std::vector<std::string> relabelled;  // domains renamed to their record's name
  std::vector<std::string> resized;     // pending resizes finished
  std::vector<std::string> restarted;   // restarts finished
  std::vector<std::string> orphans_destroyed;
  std::vector<std::string> missing;
  std::vector<std::string> elsewhere;  // domains here whose records name another host (ids)
  std::vector<std::string> adopted;    // records that followed their domain here (names)
  std::vector<std::string> migration_copies_destroyed;  // ids (see ReconcileScope)
  std::vector<std::string> started;
  std::vector<std::string> paused;
  std::vector<std::string> stopped;
  size_t jobs_expired = 0;
  int disks_removed = 0;
  std::vector<std::string> errors;  // each action that failed, with why
};

// Which host's part of the store a Reconcile settles, when one lobby drives several (serve
// --host; vmhost/host_set.h): reconcile runs per host, on that host alone, when warren
// starts and whenever the host comes back, so a host that does not answer holds nothing up
// and loses nothing. Records are the host's when their `host` names it, or names none and
// it is the default host (records from before several hosts; the record is given the name).
// A domain here whose record names another host is what a migration (migrate, VmHost::
// MigrateTo) cut short by warren's death left, and `holds` (when given) says which: the
// record's host no longer has the domain — the move was done, the record not yet changed —
// so the record follows the domain (adopted: settled here from then on); the record's host
// has it too and this one does not run — a cold move defined it here and did not undefine it
// there, or a live one stopped after the switchover, before this copy had the last writes
// (the source is undefined only then, just before this copy resumes) — so this copy is
// destroyed (the record's disk is whole; the record's host boots it again). Otherwise (no
// `holds`, the record's host does not answer, or this copy runs) it is logged and left for
// the operator.
// Empty `host`: everything, one host.
struct ReconcileScope {
  std::string host;
  std::string default_host;
  // Whether host `host_name` holds VM `id`'s domain: false when it answers that it does not;
  // an error when it cannot say (it does not answer).
  std::function<Result<bool>(const std::string& host_name, const std::string& id)> holds = {};
};

// Does everything it can; an action that fails is logged, noted in the report and does not
// stop the others. Returns the first such failure (or the failure to read the store or the
// host's list, in which case nothing was changed).
Status Reconcile(Store& store, VmHost& host, GuestControl* guests,
                 const Clock& clock = SystemClock::Get(), ReconcileReport* report = nullptr,
                 const ReconcileScope& scope = {});

}  // namespace warren
