// Which integrations a caller may see and act on, and attachments as a command line writes
// them (vm:NAME, tag:T, all), shared by the integrations commands and `new --integration`.
//
// A caller acts on its own user's integrations only. A credential limited to a tag T:
//  - sees only the integrations that reach its tag's VMs: attached to all, to tag:T, or to
//    a VM carrying T (by id or by another tag); every other one answers "not found", as
//    one that does not exist, and of those it sees it is shown only the attachments within
//    its tag (all, tag:T, vm:NAME of its VMs);
//  - attaches and detaches only vm:NAME of VMs it can see and tag:T, and only integrations
//    it sees, so it never gives its VMs an integration they could not use already;
//  - cannot add, remove or rename integrations.
// No caller ever sees a secret: only header names, "****" and the fingerprint.
// Stateless functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/store.h"
#include "lobby/base/status.h"
#include "lobby/commands/command.h"

namespace warren {

// One attachment: as stored ("vm:ID") and as shown ("vm:web-1").
struct Attachment {
  std::string stored;
  std::string shown;
};

// What the caller may know of its user's world, read once per command: its VMs (all of
// them, or those carrying its tag).
class IntegrationScope {
 public:
  static Result<IntegrationScope> Read(CommandContext& ctx);

  bool tag_limited() const { return !tag_.empty(); }
  // The integration reaches a VM the caller may see (or, for a tag-limited caller, its tag).
  bool Sees(const IntegrationRecord& integration) const;
  // The integration `name`, if the caller sees it; NotFound otherwise, worded alike.
  Result<IntegrationRecord> Find(Store& store, std::string_view name) const;
  // The caller's integrations it sees, by name.
  Result<std::vector<IntegrationRecord>> List(Store& store) const;
  // vm:NAME, tag:T or all as the caller may attach or detach it: a VM it can see
  // ("no VM named …" otherwise), a valid tag, and within its tag when tag-limited
  // (PermissionDenied).
  Result<Attachment> Parse(CommandContext& ctx, std::string_view text) const;
  // The attachments of `integration` the caller may be shown, in stored order.
  std::vector<Attachment> Shown(const IntegrationRecord& integration) const;
  // PermissionDenied for a tag-limited caller: "this token is limited to the tag "ci" and
  // may not `verb` integrations".
  Status RequireUnlimited(const CommandContext& ctx, std::string_view verb) const;

  // The integration as `integrations list/show --json` and `add` give it: never a secret.
  nlohmann::json Json(const IntegrationRecord& integration, const ServerInfo& info) const;
  // What it adds, for people: "Authorization: Bearer ****, X-Api-Key: ****" or "nothing".
  static std::string SecretsText(const IntegrationRecord& integration);

 private:
  std::string user_;
  std::string tag_;
  std::vector<VmRecord> vms_;                    // the caller's visible VMs
  std::map<std::string, std::string> vm_names_;  // their id -> name
};

// For `new --integration NAME…`, before anything is written: each integration the caller
// sees (IntegrationScope::Find), named once each, in order.
Result<std::vector<std::string>> PlanVmIntegrations(CommandContext& ctx,
                                                    const std::vector<std::string>& names);
// Attaches the VM just recorded to each (vm:ID), then tells the proxy. A failure half-way
// leaves attachments that deleting the VM's record drops with it (AbandonVm).
Status AttachVmIntegrations(CommandContext& ctx, const VmRecord& vm,
                            const std::vector<std::string>& names);

// The names of `vm`'s owner's integrations attached to it by id (vm:ID), sorted: what `cp`
// carries to the copy (attachments by tag follow the tags; `all` needs nothing).
Result<std::vector<std::string>> VmAttachedIntegrations(Store& store, const VmRecord& vm);

// http://NAME.int.DOMAIN/ (and https), as VMs reach it.
std::string IntegrationUrl(const ServerInfo& info, std::string_view name, bool https = false);

}  // namespace warren
