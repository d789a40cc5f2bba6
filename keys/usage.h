// Usage metering: what a VM accrues, and how accrual is kept. A VM accrues vCPU and memory
// time while it runs (not while paused, stopped or gone) and disk time while it exists; the
// store keeps the totals per owner, UTC day and VM (UsageRow), and on each VM record the
// marks from which its current accrual runs (VmMeter). The meter moves only on state
// transitions (the hypervisor's lifecycle events, reconcile at start, removal): time between
// two transitions, warren's own downtime included, is counted once, and no sampling loop
// can miss any. Amounts are in milliseconds so no second is rounded away. Value types and
// pure arithmetic; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace warren {

inline constexpr int64_t kMsPerDay = 86'400'000;

// What accrued over some time. Each is a product with milliseconds: running_ms is wall time
// running; vcpu_ms is vCPUs × ms running; memory_mib_ms is MiB × ms running; disk_gib_ms is
// GiB × ms the disk existed.
struct UsageAmounts {
  int64_t running_ms = 0;
  int64_t vcpu_ms = 0;
  int64_t memory_mib_ms = 0;
  int64_t disk_gib_ms = 0;

  UsageAmounts& operator+=(const UsageAmounts& o);
  bool empty() const {
    return running_ms == 0 && vcpu_ms == 0 && memory_mib_ms == 0 && disk_gib_ms == 0;
  }
};

// Where a VM's accrual stands: stored on its record (VmRecord::meter) and moved only by
// Store::MeterVm and DeleteVm, never by UpdateVm.
struct VmMeter {
  // Unix ms since which the VM runs and accrues CPU and memory; 0 while it does not run.
  int64_t running_since_ms = 0;
  // What accrues while it runs: its vCPUs and memory as they were when it started (a resize
  // takes effect at the next start, and so does its metering).
  int running_cpus = 0;
  int64_t running_memory_mib = 0;
  // Unix ms up to which disk time has been accrued (the creation; moved at every mark).
  int64_t disk_since_ms = 0;
};

// One VM's usage on one UTC day; the store keeps one row per (owner, day, VM). A user whose
// VMs would make more than kMaxUsageRowsPerUserDay rows in one day has the rest folded into
// one row with vm_id kOtherVmsId, so a user creating VMs without end cannot grow the store
// without bound; rows older than the store's retention are pruned.
struct UsageRow {
  std::string owner;
  int64_t day = 0;  // days since the Unix epoch, UTC
  std::string vm_id;
  std::string vm_name;  // the name when the row was last written
  std::string kind;     // "vm" or "sandbox"; "" in the kOtherVmsId row, which folds both
  std::string size;     // a sandbox's size; "" for a VM and in the kOtherVmsId row
  // The VM's tags (sorted) when the row was last written, so a tag-scoped caller can be
  // shown the rows of VMs that carried its tag, also after they are gone. None in the
  // kOtherVmsId row: it mixes VMs, and a tag-scoped caller must not see the others' time.
  std::vector<std::string> tags;
  UsageAmounts amounts;
};

inline constexpr size_t kMaxUsageRowsPerUserDay = 2000;
inline constexpr std::string_view kOtherVmsId = "*";
inline constexpr int64_t kUsageRetentionDays = 400;

// The UTC day (days since the epoch) of a Unix ms time.
int64_t UsageDay(int64_t unix_ms);

// What `meter` accrues from its marks up to `to_ms` for a VM whose disk is `disk_gib`, split
// by UTC day into `by_day` (added to what is there). Running time counts from
// running_since_ms, disk time from disk_since_ms; a `to_ms` before a mark accrues nothing for
// it (time never runs backward).
void AccrueTo(const VmMeter& meter, int64_t disk_gib, int64_t to_ms,
              std::map<int64_t, UsageAmounts>& by_day);

// The meter after accruing up to `at_ms` and marking the VM running (with `cpus` and
// `memory_mib` if it was not already running; a running one keeps what it started with) or
// not. Marks never move backward: an `at_ms` before a mark leaves that mark where it is.
VmMeter MarkedAt(const VmMeter& meter, bool running, int cpus, int64_t memory_mib, int64_t at_ms);

// Units as seed 002 prices them: one unit is 2 vCPUs and 4 GiB of memory for one hour; a
// VM's units are the mean of its CPU share (vCPU-hours / 2) and its memory share (GiB-hours
// / 4), so a VM of that shape makes 1 unit an hour and one of 8 vCPUs and 16 GiB makes 4.
double UsageUnits(const UsageAmounts& amounts);

}  // namespace warren
