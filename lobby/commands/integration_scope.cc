#include "lobby/commands/integration_scope.h"

#include <algorithm>

#include "keys/integration.h"
#include "keys/scope.h"
#include "lobby/commands/integration_events.h"
#include "lobby/commands/vm_access.h"

namespace warren {
namespace {

constexpr std::string_view kMask = "****";
constexpr size_t kMaxEchoedBytes = 64;

std::string Echo(std::string_view text) {
  return std::string(text.substr(0, kMaxEchoedBytes)) + (text.size() > kMaxEchoedBytes ? "…" : "");
}

}  // namespace

Result<IntegrationScope> IntegrationScope::Read(CommandContext& ctx) {
  IntegrationScope scope;
  scope.user_ = ctx.caller().user;
  scope.tag_ = ctx.caller().scope.tag;
  WARREN_ASSIGN_OR_RETURN(scope.vms_, VisibleVms(ctx));
  for (const VmRecord& vm : scope.vms_) scope.vm_names_[vm.id] = vm.name;
  return scope;
}

bool IntegrationScope::Sees(const IntegrationRecord& integration) const {
  if (integration.owner != user_) return false;
  if (tag_.empty()) return true;
  for (const std::string& a : integration.attachments) {
    if (a == kAttachAll || a == TagAttachment(tag_)) return true;
  }
  return std::any_of(vms_.begin(), vms_.end(),
                     [&](const VmRecord& vm) { return IntegrationAppliesTo(integration, vm); });
}

Result<IntegrationRecord> IntegrationScope::Find(Store& store, std::string_view name) const {
  Status missing =
      NotFound("you have no integration named \"" + Echo(name) + "\"; see integrations list");
  if (!CheckIntegrationName(name).ok()) return missing;
  Result<IntegrationRecord> found = store.GetIntegration(user_, name);
  if (!found.ok()) return found.status().code() == Code::kNotFound ? missing : found.status();
  if (!Sees(*found)) return missing;
  return found;
}

Result<std::vector<IntegrationRecord>> IntegrationScope::List(Store& store) const {
  WARREN_ASSIGN_OR_RETURN(std::vector<IntegrationRecord> all, store.ListIntegrations(user_));
  std::erase_if(all, [&](const IntegrationRecord& i) { return !Sees(i); });
  return all;
}

Result<Attachment> IntegrationScope::Parse(CommandContext& ctx, std::string_view text) const {
  if (text == kAttachAll) {
    if (!tag_.empty()) {
      return PermissionDenied(CredentialNoun(ctx.caller()) + " is limited to the tag \"" + tag_ +
                              "\": it may attach only vm:NAME of its VMs or tag:" + tag_ +
                              ", not all");
    }
    return Attachment{std::string(kAttachAll), std::string(kAttachAll)};
  }
  if (text.starts_with(kAttachTagPrefix)) {
    std::string_view tag = text.substr(kAttachTagPrefix.size());
    WARREN_RETURN_IF_ERROR(ValidateTag(tag));
    if (!tag_.empty() && tag != tag_) {
      return PermissionDenied(CredentialNoun(ctx.caller()) + " is limited to the tag \"" + tag_ +
                              "\": it may attach only vm:NAME of its VMs or tag:" + tag_);
    }
    return Attachment{TagAttachment(tag), TagAttachment(tag)};
  }
  if (text.starts_with(kAttachVmPrefix)) {
    std::string_view name = text.substr(kAttachVmPrefix.size());
    WARREN_ASSIGN_OR_RETURN(VmRecord vm, FindVisibleVm(ctx, name));
    return Attachment{VmAttachment(vm.id), std::string(kAttachVmPrefix) + vm.name};
  }
  return InvalidArgument("\"" + Echo(text) + "\" is not an attachment: vm:NAME, tag:TAG or all");
}

std::vector<Attachment> IntegrationScope::Shown(const IntegrationRecord& integration) const {
  std::vector<Attachment> out;
  for (const std::string& a : integration.attachments) {
    if (a.starts_with(kAttachVmPrefix)) {
      // Only the caller's visible VMs by name; a tag-limited caller learns of no other VM.
      auto vm = vm_names_.find(a.substr(kAttachVmPrefix.size()));
      if (vm != vm_names_.end()) {
        out.push_back({a, std::string(kAttachVmPrefix) + vm->second});
      } else if (tag_.empty()) {
        out.push_back({a, a});  // not expected: the store drops a VM's attachments with it
      }
    } else if (tag_.empty() || a == kAttachAll || a == TagAttachment(tag_)) {
      out.push_back({a, a});
    }
  }
  return out;
}

Status IntegrationScope::RequireUnlimited(const CommandContext& ctx, std::string_view verb) const {
  if (tag_.empty()) return Status::Ok();
  return PermissionDenied(CredentialNoun(ctx.caller()) + " is limited to the tag \"" + tag_ +
                          "\" and may not " + std::string(verb) +
                          " integrations; it may attach and detach those its VMs use");
}

nlohmann::json IntegrationScope::Json(const IntegrationRecord& integration,
                                      const ServerInfo& info) const {
  nlohmann::json headers = nlohmann::json::object();
  for (const std::string& name : integration.header_names) headers[name] = kMask;
  nlohmann::json attachments = nlohmann::json::array();
  for (const Attachment& a : Shown(integration)) attachments.push_back(a.shown);
  return {{"name", integration.name},
          {"kind", integration.kind},
          {"target", integration.target},
          {"headers", std::move(headers)},
          {"bearer", integration.bearer ? nlohmann::json(kMask) : nlohmann::json(nullptr)},
          {"fingerprint", integration.fingerprint},
          {"attachments", std::move(attachments)},
          {"url", IntegrationUrl(info, integration.name)},
          {"https_url", IntegrationUrl(info, integration.name, /*https=*/true)},
          {"created_at", integration.created_at}};
}

std::string IntegrationScope::SecretsText(const IntegrationRecord& integration) {
  std::string out;
  if (integration.bearer) out = "Authorization: Bearer " + std::string(kMask);
  for (const std::string& name : integration.header_names) {
    out += (out.empty() ? "" : ", ") + name + ": " + std::string(kMask);
  }
  return out.empty() ? "nothing" : out;
}

Result<std::vector<std::string>> PlanVmIntegrations(CommandContext& ctx,
                                                    const std::vector<std::string>& names) {
  std::vector<std::string> out;
  if (names.empty()) return out;
  WARREN_ASSIGN_OR_RETURN(IntegrationScope scope, IntegrationScope::Read(ctx));
  for (const std::string& name : names) {
    WARREN_ASSIGN_OR_RETURN(IntegrationRecord i, scope.Find(ctx.store(), name));
    if (std::find(out.begin(), out.end(), i.name) == out.end()) out.push_back(i.name);
  }
  return out;
}

Status AttachVmIntegrations(CommandContext& ctx, const VmRecord& vm,
                            const std::vector<std::string>& names) {
  if (names.empty()) return Status::Ok();
  const std::string attachment = VmAttachment(vm.id);
  for (const std::string& name : names) {
    WARREN_RETURN_IF_ERROR(
        ctx.store()
            .UpdateIntegration(vm.owner, name,
                               [&](IntegrationRecord& rec) {
                                 auto at = std::lower_bound(rec.attachments.begin(),
                                                            rec.attachments.end(), attachment);
                                 if (at == rec.attachments.end() || *at != attachment) {
                                   rec.attachments.insert(at, attachment);
                                 }
                                 return Status::Ok();
                               })
            .Annotate("attaching integration " + name + " to " + vm.name));
  }
  NotifyIntegrations(ctx.services, vm.owner);
  return Status::Ok();
}

Result<std::vector<std::string>> VmAttachedIntegrations(Store& store, const VmRecord& vm) {
  WARREN_ASSIGN_OR_RETURN(std::vector<IntegrationRecord> all, store.ListIntegrations(vm.owner));
  const std::string attachment = VmAttachment(vm.id);
  std::vector<std::string> names;
  for (const IntegrationRecord& i : all) {
    if (std::binary_search(i.attachments.begin(), i.attachments.end(), attachment)) {
      names.push_back(i.name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string IntegrationUrl(const ServerInfo& info, std::string_view name, bool https) {
  return std::string(https ? "https://" : "http://") + std::string(name) + "." + info.int_domain +
         "/";
}

}  // namespace warren
