// LmdbStore's usage metering: table usage (schema version 8), per owner, UTC day and VM.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "keys/usage.h"

namespace warren {

namespace lmdb {

nlohmann::json Codec<UsageRow>::Encode(const UsageRow& row) {
  return {{"owner", row.owner},
          {"day", row.day},
          {"vm_id", row.vm_id},
          {"vm_name", row.vm_name},
          {"kind", row.kind},
          {"size", row.size},
          {"tags", row.tags},
          {"running_ms", row.amounts.running_ms},
          {"vcpu_ms", row.amounts.vcpu_ms},
          {"memory_mib_ms", row.amounts.memory_mib_ms},
          {"disk_gib_ms", row.amounts.disk_gib_ms}};
}

Result<UsageRow> Codec<UsageRow>::Decode(const nlohmann::json& j) {
  try {
    UsageRow row;
    row.owner = j.at("owner").get<std::string>();
    row.day = j.at("day").get<int64_t>();
    row.vm_id = j.at("vm_id").get<std::string>();
    row.vm_name = j.value("vm_name", "");
    row.kind = j.value("kind", "vm");
    row.size = j.value("size", "");
    row.tags = j.value("tags", std::vector<std::string>{});
    row.amounts.running_ms = j.value("running_ms", int64_t{0});
    row.amounts.vcpu_ms = j.value("vcpu_ms", int64_t{0});
    row.amounts.memory_mib_ms = j.value("memory_mib_ms", int64_t{0});
    row.amounts.disk_gib_ms = j.value("disk_gib_ms", int64_t{0});
    return row;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

}  // namespace lmdb

namespace {

// Unix ms of 10000-01-01: no clock this server trusts reads later.
constexpr int64_t kMaxUsageMs = 253'402'300'800'000;
constexpr char kOtherVmsName[] = "(other VMs)";

// Days as 12 zero-padded digits (any day of a positive int64 ms fits), so that bytewise key
// order is day order.
std::string DayKey(int64_t day) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%012lld", static_cast<long long>(day < 0 ? 0 : day));
  return buf;
}

// owner NUL day NUL: one owner's rows of one day. Owner names and VM ids hold no NUL (both
// validated on the VM record), so the parts never run together.
std::string DayPrefix(std::string_view owner, int64_t day) {
  std::string k(owner);
  k.push_back('\0');
  k.append(DayKey(day));
  k.push_back('\0');
  return k;
}

std::string UsageKey(std::string_view owner, int64_t day, std::string_view vm_id) {
  return DayPrefix(owner, day).append(vm_id);
}

}  // namespace

namespace store_internal {

Status CreateUsageTables(lmdb::Txn& txn) { return CreateTables(txn, {"usage"}); }

Status OpenUsageTables(LmdbStoreState& s, lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(s.usage, lmdb::Table<UsageRow>::Open(txn, "usage", false));
  return Status::Ok();
}

Status CheckUsageTime(int64_t at_ms) {
  if (at_ms > 0 && at_ms < kMaxUsageMs) return Status::Ok();
  return InvalidArgument("usage time " + std::to_string(at_ms) +
                         " ms is not a Unix ms time between 1970 and 9999");
}

}  // namespace store_internal

Status LmdbStoreState::AccrueUsage(lmdb::Txn& txn, const VmRecord& vm, int64_t at_ms) {
  // Time before the retention would be pruned below anyway: leaving it out bounds the days
  // walked (a VM unmetered for years, a clock that jumped) to the retention.
  const int64_t oldest_kept = UsageDay(at_ms) - kUsageRetentionDays;
  VmMeter meter = vm.meter;
  const int64_t kept_from_ms = oldest_kept * kMsPerDay;
  if (meter.running_since_ms > 0)
    meter.running_since_ms = std::max(meter.running_since_ms, kept_from_ms);
  if (meter.disk_since_ms > 0) meter.disk_since_ms = std::max(meter.disk_since_ms, kept_from_ms);
  std::map<int64_t, UsageAmounts> by_day;
  AccrueTo(meter, vm.disk_gib, at_ms, by_day);
  for (const auto& [day, amounts] : by_day) {
    if (amounts.empty()) continue;
    std::optional<UsageRow> row;
    std::string key = UsageKey(vm.owner, day, vm.id);
    WARREN_ASSIGN_OR_RETURN(row, usage.Get(txn, key));
    if (!row) {
      // A new row for the day, unless the owner's VMs already made as many as a day may hold.
      size_t rows = 0;
      WARREN_RETURN_IF_ERROR(usage.Scan(txn, DayPrefix(vm.owner, day),
                                        [&](std::string_view k, UsageRow&&) -> Result<bool> {
                                          if (!k.ends_with(kOtherVmsId)) ++rows;
                                          return rows < max_usage_rows_per_user_day;
                                        }));
      if (rows >= max_usage_rows_per_user_day) {
        key = UsageKey(vm.owner, day, kOtherVmsId);
        WARREN_ASSIGN_OR_RETURN(row, usage.Get(txn, key));
        if (!row) row = UsageRow{vm.owner, day, std::string(kOtherVmsId), "", "", "", {}, {}};
      } else {
        row = UsageRow{vm.owner, day, vm.id, "", "", "", {}, {}};
      }
    }
    if (row->vm_id == kOtherVmsId) {
      row->vm_name = kOtherVmsName;
      row->kind = "";  // of every kind
      row->size = "";
      row->tags.clear();
    } else {
      row->vm_name = vm.name;
      row->kind = vm.kind;
      row->size = vm.size;
      row->tags = vm.tags;
    }
    row->amounts += amounts;
    WARREN_RETURN_IF_ERROR(usage.Put(txn, key, *row));
  }

  // Retention: the owner's rows in day order, up to the first one young enough to keep.
  std::vector<std::string> old_keys;
  WARREN_RETURN_IF_ERROR(usage.Scan(txn, store_internal::UserPrefix(vm.owner),
                                    [&](std::string_view k, UsageRow&& r) -> Result<bool> {
                                      if (r.day >= oldest_kept) return false;
                                      old_keys.emplace_back(k);
                                      return true;
                                    }));
  // Deleted after the scan: a scan must not see its own table change under it.
  for (const std::string& k : old_keys) WARREN_RETURN_IF_ERROR(usage.Delete(txn, k).status());
  return Status::Ok();
}

Status LmdbStore::MeterVm(std::string_view id, bool running, int64_t at_ms) {
  WARREN_RETURN_IF_ERROR(store_internal::CheckUsageTime(at_ms));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s_->vms.Get(txn, id));
  if (!vm) return NotFound("no VM with id " + store_internal::Shown(id));
  WARREN_RETURN_IF_ERROR(s_->AccrueUsage(txn, *vm, at_ms));
  vm->meter = MarkedAt(vm->meter, running, vm->cpus, vm->memory_mib, at_ms);
  WARREN_RETURN_IF_ERROR(s_->vms.Put(txn, vm->id, *vm));
  return txn.Commit();
}

Result<std::vector<UsageRow>> LmdbStore::ListUsage(std::string_view owner, int64_t since_day) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<UsageRow> out;
  auto keep = [&](std::string_view, UsageRow&& row) -> Result<bool> {
    if (row.day >= since_day) out.push_back(std::move(row));
    return true;
  };
  // Keys sort by owner (NUL ends it, so "al" comes before "al-x"), day, then VM id: the
  // order promised, with no sort. One owner's rows from a day on are one range.
  if (owner.empty()) {
    WARREN_RETURN_IF_ERROR(s_->usage.Scan(txn, "", keep));
  } else {
    std::string from = DayPrefix(owner, since_day);
    from.pop_back();  // the day's rows and all later ones
    WARREN_RETURN_IF_ERROR(s_->usage.ScanFrom(txn, store_internal::UserPrefix(owner), from, keep));
  }
  return out;
}

}  // namespace warren
