#include "lobby/commands/usage_meter.h"

#include <set>
#include <string>
#include <vector>

#include "lobby/base/log.h"

namespace warren {

void UsageMeter::OnStateChange(const VmStateEvent& event) {
  Status st = store_.MeterVm(event.id, event.state == VmState::kRunning, clock_.NowUnixMs());
  if (!st.ok() && st.code() != Code::kNotFound) {
    LogWarn("metering VM " + LogQuote(event.id) + ": " + LogQuote(st.ToString()));
  }
}

Status UsageMeter::Resync(VmHost& host) {
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> vms, store_.ListVms());
  WARREN_ASSIGN_OR_RETURN(std::vector<VmInfo> domains, host.List());
  std::set<std::string, std::less<>> running;
  for (const VmInfo& d : domains) {
    if (d.state == VmState::kRunning) running.insert(d.id);
  }
  Status first = Status::Ok();
  for (const VmRecord& vm : vms) {
    Status st = store_.MeterVm(vm.id, running.contains(vm.id), clock_.NowUnixMs());
    if (!st.ok() && st.code() != Code::kNotFound && first.ok()) {
      first = st.Annotate("metering " + vm.name);
    }
  }
  return first;
}

}  // namespace warren
