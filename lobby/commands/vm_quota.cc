#include "lobby/commands/vm_quota.h"

#include <map>
#include <vector>

#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"

namespace warren {

const std::array<LimitField, 5> kLimitFields = {{
    {LimitKind::kVms, "vms", "--max-vms", &UserLimits::max_vms, &VmHolding::vms,
     "have at most %s VMs"},
    {LimitKind::kCpus, "cpus", "--max-cpu", &UserLimits::max_cpus, &VmHolding::cpus,
     "run at most %s vCPUs"},
    {LimitKind::kMemoryMib, "memory_mib", "--max-memory", &UserLimits::max_memory_mib,
     &VmHolding::memory_mib, "run at most %s of memory"},
    {LimitKind::kDiskGib, "disk_gib", "--max-disk", &UserLimits::max_disk_gib, &VmHolding::disk_gib,
     "have at most %s of disk"},
    {LimitKind::kSandboxes, "sandboxes", "--max-sandboxes", &UserLimits::max_sandboxes,
     &VmHolding::sandboxes, "have at most %s sandboxes at once"},
}};

namespace {

std::string Fill(const char* pattern, const std::string& value) {
  std::string out = pattern;
  out.replace(out.find("%s"), 2, value);
  return out;
}

// Per user, shared by the locks held on it; entries nobody holds are dropped as we go.
std::mutex table_mu;
std::map<std::string, std::weak_ptr<std::mutex>, std::less<>>& LockTable() {
  static auto* table = new std::map<std::string, std::weak_ptr<std::mutex>, std::less<>>;
  return *table;
}

std::shared_ptr<std::mutex> MutexFor(std::string_view user) {
  std::lock_guard lock(table_mu);
  auto& table = LockTable();
  for (auto it = table.begin(); it != table.end();) {
    it = it->second.expired() ? table.erase(it) : std::next(it);
  }
  auto it = table.find(user);
  std::shared_ptr<std::mutex> mu = it == table.end() ? nullptr : it->second.lock();
  if (!mu) {
    mu = std::make_shared<std::mutex>();
    table[std::string(user)] = mu;
  }
  return mu;
}

}  // namespace

VmHolding HoldingOf(const VmRecord& vm) {
  VmHolding h;
  h.vms = 1;
  h.disk_gib = vm.disk_gib;
  h.sandboxes = IsSandbox(vm) ? 1 : 0;
  if (vm.desired_state != DesiredState::kStopped) {
    h.cpus = vm.cpus;
    h.memory_mib = vm.memory_mib;
  }
  return h;
}

UserLimits EffectiveLimits(const UserLimits& own, const UserLimits& server) {
  UserLimits out;
  for (const LimitField& rule : kLimitFields) {
    const std::optional<int64_t>& mine = own.*rule.limit;
    out.*rule.limit = mine ? mine : server.*rule.limit;
    if (!(out.*rule.limit)) out.*rule.limit = kNoLimit;
  }
  return out;
}

UserQuotaLock::UserQuotaLock(std::string_view user) : mu_(MutexFor(user)), lock_(*mu_) {}

Status CheckUserQuota(CommandContext& ctx, const VmRecord& planned) {
  WARREN_ASSIGN_OR_RETURN(User owner, ctx.store().GetUser(planned.owner));
  const UserLimits limits = EffectiveLimits(owner.limits, ctx.services.vm_defaults.user_limits);
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> all, ctx.store().ListVms());
  VmHolding others;
  VmHolding before;  // what the VM holds as recorded now: nothing for a new one
  for (const VmRecord& vm : all) {
    if (vm.owner != planned.owner) continue;
    const VmHolding h = HoldingOf(vm);
    VmHolding& into = vm.id == planned.id ? before : others;
    for (const LimitField& rule : kLimitFields) into.*rule.held += h.*rule.held;
  }
  const VmHolding after = HoldingOf(planned);
  for (const LimitField& rule : kLimitFields) {
    const int64_t limit = *(limits.*rule.limit);
    const int64_t more = after.*rule.held - before.*rule.held;
    if (limit == kNoLimit || more <= 0 || others.*rule.held + after.*rule.held <= limit) continue;
    const std::string held = FormatUserLimit(rule.kind, others.*rule.held + before.*rule.held);
    return LimitExceeded(
        owner.name + " may " + Fill(rule.rule, FormatUserLimit(rule.kind, limit)) + " (" + held +
        " held now, this needs " + FormatUserLimit(rule.kind, more) +
        " more); stop or remove a VM, or ask an admin: " + SshHint(ctx.services.info) +
        " user set " + owner.name + " " + rule.flag + " N");
  }
  return Status::Ok();
}

}  // namespace warren
