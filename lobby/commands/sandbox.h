// Sandboxes (product.md §6, seeds 002 and 004): VMs with a size from the server's table,
// a lifetime after which warren destroys them, and vCPUs and memory reserved for them —
// admitted against what the host has, so sandboxes never overcommit it (ordinary VMs may).
// The one home of their rules: sizes, lifetimes, names, the host's room for them. Pure
// functions and value types apart from the random name; thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "vmhost/vm_host.h"

namespace warren {

inline constexpr std::string_view kSandboxKind = "sandbox";
inline constexpr std::string_view kVmKind = "vm";
inline constexpr int64_t kDefaultSandboxSeconds = 15 * 60;
inline constexpr int64_t kMaxSandboxSeconds = 24 * 3600;
inline constexpr int64_t kDefaultMaxSandboxes = 20;  // per user, unless set otherwise

struct SandboxSize {
  std::string name;  // a DNS-label-like word: ^[a-z][a-z0-9-]{0,31}$
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;  // 0: the server's default disk (new --disk overrides either)
};

// What a server's sandboxes are (serve --sandbox-size, --reserve-cpu, --reserve-memory,
// --sandbox-overcommit, --price-unit).
struct SandboxPolicy {
  // small = 2 vCPU / 4 GiB, medium = 4 / 8, large = 8 / 16 unless replaced; the first is the
  // default size.
  std::vector<SandboxSize> sizes = {{"small", 2, 4096}, {"medium", 4, 8192}, {"large", 8, 16384}};
  std::string default_size = "small";
  // The host's own share, kept out of what sandboxes may reserve.
  int reserve_cpus = 0;
  int64_t reserve_memory_mib = 0;
  // Sandboxes may reserve this many times what the host has (1.0: never more than it has).
  double overcommit = 1.0;
  // Money per unit (keys/usage.h UsageUnits); 0: usage is shown in units only.
  double price_unit = 0;
};

// The size called `name`; InvalidArgument listing the sizes there are.
Result<SandboxSize> FindSandboxSize(const SandboxPolicy& policy, std::string_view name);
// "NAME=CPU,MEM[,DISK]" as serve --sandbox-size takes it ("test=1,512M,2G"); memory as
// ParseMemoryMib, disk as ParseDiskGib.
Result<SandboxSize> ParseSandboxSize(std::string_view text);
// Adds or replaces a size in the table.
void PutSandboxSize(SandboxPolicy& policy, SandboxSize size);
// "small (2 vCPU, 4 GiB), medium (4 vCPU, 8 GiB)…": for help and errors.
std::string SandboxSizesText(const SandboxPolicy& policy);

// A lifetime as `new --timeout` takes it: "15m", "90s", "2h", "1h30m", a bare number of
// minutes; 1 minute to 24 hours. InvalidArgument naming `flag` otherwise.
Result<int64_t> ParseSandboxLifetime(std::string_view flag, std::string_view text);

// A made-up sandbox name: "sbx-" and 8 of [a-z0-9]; always a valid VM name.
std::string NewSandboxName();

bool IsSandbox(const VmRecord& vm);

// What sandboxes reserve of the host now: the vCPUs and memory of every sandbox meant to
// run (desired running or paused, also while `new` makes it); a stopped one reserves nothing.
struct SandboxReservation {
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  int64_t count = 0;
};
SandboxReservation ReservedBySandboxes(const std::vector<VmRecord>& vms,
                                       std::string_view except_id = {});

// Whether the host has room for `cpus` and `memory_mib` more of reservation on top of
// `reserved`: at most (cores - reserve_cpus) × overcommit vCPUs and (memory - reserve_memory)
// × overcommit MiB in all. LimitExceeded with the figures otherwise.
Status CheckSandboxRoom(const HostCapacity& host, const SandboxPolicy& policy,
                        const SandboxReservation& reserved, int cpus, int64_t memory_mib);

// Held from the room check until the sandbox's record (or its new desired state) is written,
// so two sandboxes made at once cannot both take the host's last room. One per process.
class SandboxRoomLock {
 public:
  SandboxRoomLock();

 private:
  std::unique_lock<std::mutex> lock_;
};

// The expiry `extend` gives: `minutes` more from the later of now and the current expiry,
// but never more than kMaxSandboxSeconds from now (`capped` says when it was cut).
struct ExtendedExpiry {
  int64_t expires_at = 0;
  bool capped = false;
};
ExtendedExpiry ExtendExpiry(int64_t now, int64_t expires_at, int64_t minutes);

}  // namespace warren
