// Where a VM goes when one lobby drives several hosts (vmhost/host_set.h, serve --host): the
// one home of placement policy. A host takes new VMs when it answers, has its isolation rules
// (egress_firewall.h) and is not drained (`hosts drain`, a HostRecord in the store); among
// those, a new VM goes to the one with the most memory not yet committed, sandbox
// reservations counted, that has room for it (CheckHostRoom). A copy stays on its source's
// host (the disk chain is there). With no HostSet (services.hosts null: one host, tests)
// everything is on the one host and a record's host stays "". Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace warren {

// The host a record's VM is on: its `host`, or the default host for a record from before
// several hosts ("" without a HostSet).
std::string HostOfRecord(const Services& services, const VmRecord& vm);

// The host a new VM `planned` (its sizes; a sandbox's reservation) goes to: `requested`
// (new --host, which only admins may give) when that host may take it, else the best host:
// one of `preferred` (the hosts where an idle pooled VM of its shape waits, whose memory is
// committed already) when one of them takes it, else any. NotFound for an unknown name;
// Unavailable when the named host (or every host) does not answer; Conflict for a named host
// without isolation, or drained; LimitExceeded (the best host's figures) when no host has
// room. "" without a HostSet.
Result<std::string> PlaceNewVm(CommandContext& ctx, const VmRecord& planned,
                               std::string_view requested,
                               const std::vector<std::string>& preferred = {});

// The hosts that take new VMs now, by PlaceNewVm's rules but room (they answer, isolate their
// VMs, are not drained), in the order given at serve: where templates and the warm pool are
// kept. {""} without a HostSet; empty when the store cannot be read.
std::vector<std::string> HostsForNewVms(Services& services);

// Whether host `name` may take VM `vm` moved there (migrate): PlaceNewVm's rules for a host
// named — it answers, isolates its VMs, is not drained and has room for the VM's vCPUs, its
// disk and, when `running` (a live move), its memory — with PlaceNewVm's errors. Whether the
// VM is on that host already is the caller's to check.
Status CheckHostTakes(CommandContext& ctx, const VmRecord& vm, std::string_view name, bool running);

// The records of `all` whose VM is on host `name` (HostOfRecord).
std::vector<VmRecord> VmsOnHost(const Services& services, std::vector<VmRecord> all,
                                const std::string& name);

// Whether host `name` is drained, from the store; false when it has no record.
Result<bool> HostDrained(Store& store, std::string_view name);

}  // namespace warren
