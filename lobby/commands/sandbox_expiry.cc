#include "lobby/commands/sandbox_expiry.h"

#include <algorithm>
#include <chrono>

#include "lobby/base/log.h"
#include "lobby/commands/audit_line.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/vm_access.h"

namespace warren {

std::vector<std::string> ExpireSandboxes(Services& services, int64_t now) {
  std::vector<std::string> removed;
  Result<std::vector<VmRecord>> all = services.store->ListVms();
  if (!all.ok()) {
    LogWarn("expiring sandboxes: " + LogQuote(all.status().ToString()));
    return removed;
  }
  std::vector<VmRecord> due;
  for (VmRecord& vm : *all) {
    if (IsSandbox(vm) && vm.expires_at > 0 && vm.expires_at <= now) due.push_back(std::move(vm));
  }
  std::sort(due.begin(), due.end(), [](const VmRecord& a, const VmRecord& b) {
    return a.expires_at != b.expires_at ? a.expires_at < b.expires_at : a.name < b.name;
  });
  for (const VmRecord& vm : due) {
    const auto start = std::chrono::steady_clock::now();
    // Its CPU and memory stop counting at its expiry, even when warren was down then.
    Status st = services.store->MeterVm(vm.id, /*running=*/false, vm.expires_at * 1000);
    if (st.ok() || st.code() == Code::kNotFound) st = RemoveVm(services, vm);
    if (st.code() == Code::kNotFound) continue;  // removed meanwhile
    const auto dur_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    WriteAuditLine({.path = "expire",
                    .vm = vm.name,
                    .credential = "warren",
                    .user = vm.owner,
                    .surface = "warren",
                    .code = st.code(),
                    .dur_ms = dur_ms});
    if (!st.ok()) {
      LogWarn("expiring sandbox " + LogQuote(vm.name) + ": " + LogQuote(st.ToString()) +
              "; retrying");
      continue;
    }
    removed.push_back(vm.name);
  }
  return removed;
}

}  // namespace warren
