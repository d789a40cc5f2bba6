// Per-user limits on what a user's VMs hold: the one home of the rule and of its counting.
// Every VM a user owns counts toward their VM count and holds its whole disk (and a sandbox
// toward their sandboxes, stopped or not: the concurrency limit); a VM meant to
// run (desired running or paused, also while `new` or `cp` makes it) holds its vCPUs and
// memory too, a stopped one does not, so `start` is checked like `new`. The limits are the
// user's own (keys/store.h UserLimits), else the server's (VmDefaults::user_limits). Only
// growth is refused: a user over a limit an admin lowered keeps what they have.
// The host's own room is a separate rule (vmhost CheckHostRoom). Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"
#include "lobby/commands/vm_flags.h"

namespace warren {

struct VmDefaults;

// What one VM holds by the rule above.
struct VmHolding {
  int64_t vms = 0;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  int64_t sandboxes = 0;  // 1 for a sandbox, whatever its state
};
VmHolding HoldingOf(const VmRecord& vm);

// The four limits, for the commands that check, show or set them: one row each.
struct LimitField {
  LimitKind kind;
  const char* name;  // "vms", "cpus", "memory_mib", "disk_gib": the JSON key
  const char* flag;  // "--max-vms" of `user add|set`; `serve` has "--user-max-vms"
  std::optional<int64_t> UserLimits::*limit;
  int64_t VmHolding::*held;
  const char* rule;  // "run at most %s vCPUs", %s the limit as FormatUserLimit shows it
};
extern const std::array<LimitField, 5> kLimitFields;

// The user's own limits where set, the server's elsewhere: every field set.
UserLimits EffectiveLimits(const UserLimits& own, const UserLimits& server);

// Held while a command checks a user's limits and then records what it takes (the VM record
// of a `new` or `cp`, the new sizes of a `resize`, the desired state of a `start`), so two
// commands of one user at once cannot both take the last of a limit. The table is per
// process: one warren serves one store (LmdbStore refuses a second open).
class UserQuotaLock {
 public:
  explicit UserQuotaLock(std::string_view user);

 private:
  std::shared_ptr<std::mutex> mu_;
  std::unique_lock<std::mutex> lock_;
};

// LimitExceeded when `planned` would take its owner past one of their limits: the owner's
// other VMs (from the store) plus `planned`, for each kind `planned` holds more of than the
// VM's stored record does now (none for a VM not yet recorded). The message names the limit,
// what is held and how to get more. Call with the owner's UserQuotaLock held.
Status CheckUserQuota(CommandContext& ctx, const VmRecord& planned);

}  // namespace warren
