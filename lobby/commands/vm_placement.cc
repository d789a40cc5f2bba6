#include "lobby/commands/vm_placement.h"

#include <algorithm>
#include <vector>

#include "lobby/base/host_name.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/sandbox.h"
#include "vmhost/host_set.h"

namespace warren {

std::string HostOfRecord(const Services& services, const VmRecord& vm) {
  if (!vm.host.empty() || services.hosts == nullptr) return vm.host;
  return services.hosts->default_host();
}

std::vector<VmRecord> VmsOnHost(const Services& services, std::vector<VmRecord> all,
                                const std::string& name) {
  std::vector<VmRecord> here;
  for (VmRecord& vm : all) {
    if (HostOfRecord(services, vm) == name) here.push_back(std::move(vm));
  }
  return here;
}

namespace {

// Whether `records` (the store's hosts) say host `name` is drained.
bool Drained(const std::vector<HostRecord>& records, std::string_view name) {
  return std::any_of(records.begin(), records.end(),
                     [&](const HostRecord& r) { return r.name == name && r.drained; });
}

// Why `host` takes no new VM now ("" when it may): the first rule it fails.
std::string Refusal(const HostStatus& host, bool drained) {
  if (!host.reachable) return "host " + host.name + " does not answer: " + host.error;
  if (!host.isolated) {
    return "host " + host.name +
           " has no isolation rules for its VMs (they could reach the host and its "
           "networks), so warren places no VM there";
  }
  if (drained) return "host " + host.name + " is drained (hosts undrain " + host.name + ")";
  return "";
}

}  // namespace

Result<bool> HostDrained(Store& store, std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(std::vector<HostRecord> records, store.ListHosts());
  return Drained(records, name);
}

std::vector<std::string> HostsForNewVms(Services& services) {
  HostSet* hosts = services.hosts;
  if (hosts == nullptr) return {""};
  Result<std::vector<HostRecord>> records = services.store->ListHosts();
  if (!records.ok()) return {};
  if (hosts->names().size() == 1) {
    // One host: isolated at start (serve stops otherwise), as PlaceNewVm takes it.
    if (Drained(*records, hosts->default_host())) return {};
    return {hosts->default_host()};
  }
  std::vector<std::string> out;
  for (const HostStatus& host : hosts->Statuses(/*contents=*/false)) {
    if (Refusal(host, Drained(*records, host.name)).empty()) out.push_back(host.name);
  }
  return out;
}

Result<std::string> PlaceNewVm(CommandContext& ctx, const VmRecord& planned,
                               std::string_view requested,
                               const std::vector<std::string>& preferred) {
  HostSet* hosts = ctx.services.hosts;
  if (hosts == nullptr) {
    if (!requested.empty()) return Unavailable("this server drives a single VM host");
    return std::string();
  }
  if (!requested.empty()) {
    WARREN_RETURN_IF_ERROR(CheckHostName(requested));
    if (hosts->member(requested) == nullptr) {
      std::string names;
      for (const std::string& n : hosts->names()) names += (names.empty() ? "" : ", ") + n;
      return NotFound("no host named " + std::string(requested) + "; the hosts are " + names);
    }
  }
  WARREN_ASSIGN_OR_RETURN(std::vector<HostRecord> records, ctx.store().ListHosts());
  if (hosts->names().size() == 1 && requested.empty()) {
    // One host: it was isolated at start (serve stops otherwise) and checks its own room
    // when asked to make the VM; only a drain is the lobby's to check.
    const std::string& only = hosts->default_host();
    if (Drained(records, only)) {
      return Conflict("host " + only + " is drained (hosts undrain " + only + ")");
    }
    return only;
  }
  WARREN_ASSIGN_OR_RETURN(std::vector<VmRecord> all, ctx.store().ListVms());
  const HostDemand demand{planned.cpus, planned.memory_mib, planned.disk_gib};

  Status best_refusal;
  std::string best;
  int64_t best_free = INT64_MIN;
  bool best_preferred = false;
  // Only the room: every host's VM and image listings are `hosts`' business, not each `new`'s.
  for (const HostStatus& host : hosts->Statuses(/*contents=*/false)) {
    if (!requested.empty() && host.name != requested) continue;
    if (std::string why = Refusal(host, Drained(records, host.name)); !why.empty()) {
      if (!requested.empty()) {
        return host.reachable ? Conflict(why) : Unavailable(why);
      }
      if (best_refusal.ok()) best_refusal = host.reachable ? Conflict(why) : Unavailable(why);
      continue;
    }
    const SandboxReservation reserved =
        ReservedBySandboxes(VmsOnHost(ctx.services, all, host.name), planned.id);
    if (Status room = CheckHostRoom(host.capacity, demand); !room.ok()) {
      if (!requested.empty()) return room.Annotate("host " + host.name);
      // The refusal of a host that answered beats one that did not.
      if (best_refusal.ok() || best_refusal.code() != Code::kLimitExceeded) {
        best_refusal = room.Annotate("host " + host.name);
      }
      continue;
    }
    // Running sandboxes' reservations are committed already; one still being made is not.
    const int64_t free = host.capacity.memory_mib -
                         std::max(host.capacity.memory_committed_mib, reserved.memory_mib);
    const bool is_preferred =
        std::find(preferred.begin(), preferred.end(), host.name) != preferred.end();
    if (std::make_pair(is_preferred, free) > std::make_pair(best_preferred, best_free)) {
      best_preferred = is_preferred;
      best_free = free;
      best = host.name;
    }
  }
  if (!best.empty()) return best;
  if (!best_refusal.ok()) {
    return best_refusal.Annotate(hosts->names().size() == 1 ? "placing the VM"
                                                            : "no host takes the VM");
  }
  return Unavailable("no host takes new VMs");
}

Status CheckHostTakes(CommandContext& ctx, const VmRecord& vm, std::string_view name,
                      bool running) {
  if (name.empty()) return InvalidArgument("no host named");
  VmRecord planned = vm;
  // A stopped VM holds no memory there until it is started (which checks again).
  if (!running) planned.memory_mib = 0;
  return PlaceNewVm(ctx, planned, name).status();
}

}  // namespace warren
