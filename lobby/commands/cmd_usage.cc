// usage: what the caller's VMs and sandboxes have used, metered per second (keys/usage.h):
// vCPU and memory time while they ran, disk while they existed, per VM and in total, in
// units (one unit = 2 vCPUs and 4 GiB for an hour) and, when the server has a price, money.
// The stored day rows plus what each live VM accrued since its meter's last mark, so the
// figures are exact to the moment asked. A credential limited to a tag sees only VMs that
// carry (or carried, for removed ones) its tag; `--all` (admins, with a credential not limited
// to a tag) shows every user's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <CLI/CLI.hpp>

#include "lobby/commands/builtin_commands.h"
#include "lobby/commands/command_table.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/text_format.h"
#include "lobby/commands/vm_access.h"

namespace warren {
namespace {

// Days since the epoch of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD" (UTC) as a day number.
Result<int64_t> ParseDay(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("--since takes a date, YYYY-MM-DD (UTC), not \"" +
                           std::string(text.substr(0, 32)) + "\"");
  };
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return bad();
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (text[i] < '0' || text[i] > '9') return bad();
  }
  const int y = std::stoi(std::string(text.substr(0, 4)));
  const int m = std::stoi(std::string(text.substr(5, 2)));
  const int d = std::stoi(std::string(text.substr(8, 2)));
  if (y < 1970 || m < 1 || m > 12 || d < 1 || d > 31) return bad();
  const int64_t day = DaysFromCivil(y, m, d);
  // Reject dates such as 2026-02-31 rather than roll them over.
  if (DaysFromCivil(y, m, 1) + d - 1 != day || (m < 12 && day >= DaysFromCivil(y, m + 1, 1)) ||
      (m == 12 && day >= DaysFromCivil(y + 1, 1, 1))) {
    return bad();
  }
  return day;
}

std::string DayText(int64_t day) {
  // civil_from_days
  day += 719468;
  const int64_t era = (day >= 0 ? day : day - 146096) / 146097;
  const int64_t doe = day - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d));
  return buf;
}

double Rounded(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// One VM's line of the report.
struct Line {
  std::string id, name, owner, kind, size;
  bool live = false;
  std::vector<std::string> tags;
  UsageAmounts amounts;
};

nlohmann::json Figures(const UsageAmounts& a, double price) {
  const double units = UsageUnits(a);
  nlohmann::json j = {{"running_seconds", Rounded(a.running_ms / 1000.0, 3)},
                      {"vcpu_seconds", Rounded(a.vcpu_ms / 1000.0, 3)},
                      {"memory_gib_seconds", Rounded(a.memory_mib_ms / 1024.0 / 1000.0, 3)},
                      {"disk_gib_hours", Rounded(a.disk_gib_ms / 3'600'000.0, 6)},
                      {"units", Rounded(units, 6)}};
  j["cost"] = price > 0 ? nlohmann::json(Rounded(units * price, 6)) : nlohmann::json();
  return j;
}

std::string Hours(int64_t unit_ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", unit_ms / 3'600'000.0);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

class UsageCommand final : public Command {
 public:
  void DeclareFlags(CLI::App& app) override {
    since_opt_ = app.add_option("--since", since_, "from this UTC day on (default: all kept)")
                     ->type_name("YYYY-MM-DD");
    vm_opt_ =
        app.add_option("--vm", vm_, "only this VM (also one removed since)")->type_name("NAME");
    app.add_flag("--all", all_, "every user's VMs (admins only)");
  }

  Result<CommandResult> Run(CommandContext& ctx) override {
    const Caller& caller = ctx.caller();
    if (all_ && !caller.admin) return PermissionDenied("usage --all is for admins");
    // Every user's VMs are not what a credential limited to a tag may see, admin or not.
    if (all_ && !caller.scope.tag.empty()) {
      return PermissionDenied("usage --all shows every user's VMs, and " + CredentialNoun(caller) +
                              " is limited to the tag \"" + caller.scope.tag + "\"");
    }
    int64_t since_day = 0;
    if (since_opt_->count() > 0) {
      // Braced: the macro is two statements.
      WARREN_ASSIGN_OR_RETURN(since_day, ParseDay(since_));
    }
    const int64_t now_ms = ctx.services.clock->NowUnixMs();
    const std::string& tag = caller.scope.tag;

    // The live VMs whose usage the caller may see, by id.
    std::map<std::string, VmRecord> live;
    if (all_) {
      WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> vms, ctx.store().ListVms());
      for (VmRecord& vm : vms) live.emplace(vm.id, std::move(vm));
    } else {
      WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> vms, VisibleVms(ctx));
      for (VmRecord& vm : vms) live.emplace(vm.id, std::move(vm));
    }
    auto carries_tag = [&](const std::vector<std::string>& tags) {
      return tag.empty() || std::find(tags.begin(), tags.end(), tag) != tags.end();
    };

    std::string only_id;
    if (vm_opt_->count() > 0) {
      Result<VmRecord> vm = FindVisibleVm(ctx, vm_);
      if (vm.ok()) {
        only_id = vm->id;
      } else if (vm.status().code() != Code::kNotFound) {
        return vm.status();
      }
    }

    WARREN_ASSIGN_OR_RETURN(std::vector<UsageRow> rows,
                            ctx.store().ListUsage(all_ ? "" : caller.user, since_day));
    std::map<std::string, Line> lines;  // by owner and id, so --all keeps users apart
    auto line_for = [&](const std::string& owner, const std::string& id) -> Line& {
      return lines[owner + '\0' + id];
    };
    for (const UsageRow& row : rows) {
      auto vm = live.find(row.vm_id);
      if (vm == live.end() && !carries_tag(row.tags)) continue;
      if (vm != live.end() && vm->second.owner != row.owner) continue;
      Line& l = line_for(row.owner, row.vm_id);
      l.amounts += row.amounts;
      if (l.id.empty()) {
        l.id = row.vm_id;
        l.name = row.vm_id == kOtherVmsId ? "(other VMs)" : row.vm_name;
        l.owner = row.owner;
        l.kind = row.kind;
        l.size = row.size;
        l.tags = row.tags;
      }
    }
    for (const auto& [id, vm] : live) {
      std::map<int64_t, UsageAmounts> by_day;
      AccrueTo(vm.meter, vm.disk_gib, now_ms, by_day);
      Line& l = line_for(vm.owner, id);
      for (const auto& [day, amounts] : by_day) {
        if (day >= since_day) l.amounts += amounts;
      }
      // What the VM is now names it.
      l.id = id;
      l.name = vm.name;
      l.owner = vm.owner;
      l.kind = vm.kind;
      l.size = vm.size;
      l.tags = vm.tags;
      l.live = true;
    }

    const double price = ctx.services.sandboxes.price_unit;
    nlohmann::json list = nlohmann::json::array();
    UsageAmounts total;
    std::vector<std::string> header = {"NAME",      "KIND",       "RUNNING", "VCPU-H",
                                       "MEM-GIB-H", "DISK-GIB-H", "UNITS"};
    if (all_) header.insert(header.begin() + 1, "OWNER");
    if (price > 0) header.push_back("COST");
    TextTable table(header);
    bool matched = false;
    for (const auto& [key, l] : lines) {
      if (vm_opt_->count() > 0) {
        if (!only_id.empty() ? l.id != only_id : (l.live || l.name != vm_)) continue;
      }
      matched = true;
      if (l.amounts.empty() && !l.live) continue;
      nlohmann::json j = {{"name", l.name},
                          {"id", l.id},
                          {"owner", l.owner},
                          {"kind", l.kind},
                          {"size", l.size.empty() ? nlohmann::json() : nlohmann::json(l.size)},
                          {"live", l.live}};
      j.update(Figures(l.amounts, price));
      list.push_back(std::move(j));
      total += l.amounts;
      std::vector<std::string> row = {l.name,
                                      l.kind,
                                      FormatDurationText(l.amounts.running_ms / 1000),
                                      Hours(l.amounts.vcpu_ms),
                                      Hours(l.amounts.memory_mib_ms / 1024),
                                      Hours(l.amounts.disk_gib_ms),
                                      Fixed(UsageUnits(l.amounts), 4)};
      if (all_) row.insert(row.begin() + 1, l.owner);
      if (price > 0) row.push_back(Fixed(UsageUnits(l.amounts) * price, 4));
      table.AddRow(std::move(row));
    }
    if (vm_opt_->count() > 0 && !matched) {
      return NotFound("no usage of a VM named \"" + vm_.substr(0, 64) + "\"");
    }

    CommandResult r;
    r.data = {
        {"since", since_opt_->count() > 0 ? nlohmann::json(DayText(since_day)) : nlohmann::json()},
        {"until", now_ms / 1000},
        {"vms", std::move(list)},
        {"total", Figures(total, price)},
        {"price_unit", price > 0 ? nlohmann::json(price) : nlohmann::json()}};
    std::vector<std::string> sum = {"total",
                                    "",
                                    FormatDurationText(total.running_ms / 1000),
                                    Hours(total.vcpu_ms),
                                    Hours(total.memory_mib_ms / 1024),
                                    Hours(total.disk_gib_ms),
                                    Fixed(UsageUnits(total), 4)};
    if (all_) sum.insert(sum.begin() + 1, "");
    if (price > 0) sum.push_back(Fixed(UsageUnits(total) * price, 4));
    table.AddRow(std::move(sum));
    r.text = table.Render() + "(one unit is 2 vCPUs and 4 GiB of memory for an hour" +
             (price > 0 ? ", priced at " + Fixed(price, 4) : std::string()) + ")\n";
    return r;
  }

 private:
  static std::string FormatDurationText(int64_t seconds) {
    if (seconds < 60) return std::to_string(seconds) + "s";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
    return buf;
  }

  std::string since_, vm_;
  bool all_ = false;
  CLI::Option* since_opt_ = nullptr;
  CLI::Option* vm_opt_ = nullptr;
};

}  // namespace

void RegisterUsageCommand(CommandTable& table) {
  table.Add({
      .path = "usage",
      .summary = "what your VMs and sandboxes have used",
      .description =
          "Usage metered per second, per VM and in total: vCPU-hours and GiB-hours of memory "
          "while a VM ran (not while it was paused or stopped), GiB-hours of disk while it "
          "existed, and units (one unit is 2 vCPUs and 4 GiB of memory for an hour), with "
          "the cost when this server has a price. Removed VMs stay in it.\n"
          "  usage\n"
          "  usage --since 2026-12-01 --vm sbx-1a2b3c4d --json\n",
      .read_only = true,
      .make = [] { return std::make_unique<UsageCommand>(); },
  });
}

}  // namespace warren
