#include "lobby/commands/sandbox_room.h"

#include <vector>

#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"
#include "lobby/commands/vm_placement.h"
#include "vmhost/host_set.h"
#include "vmhost/vm_host.h"

namespace warren {

Status CheckSandboxRoomFor(CommandContext& ctx, const VmRecord& planned) {
  if (!IsSandbox(planned)) return Status::Ok();
  if (ctx.services.vms == nullptr) return Unavailable("this server runs no VMs");
  // The room and the reservations of the host it is (to be) on.
  const std::string where = HostOfRecord(ctx.services, planned);
  Result<HostCapacity> host = ctx.services.hosts != nullptr ? ctx.services.hosts->CapacityOf(where)
                                                            : ctx.services.vms->Capacity();
  if (!host.ok()) return host.status().Annotate("asking the host what room it has for sandboxes");
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> all, ctx.store().ListVms());
  return CheckSandboxRoom(
      *host, ctx.services.sandboxes,
      ReservedBySandboxes(VmsOnHost(ctx.services, std::move(all), where), planned.id), planned.cpus,
      planned.memory_mib);
}

}  // namespace warren
