#include "lobby/commands/integration_access.h"

#include <algorithm>

#include "lobby/base/log.h"

namespace warren {
namespace {

constexpr size_t kMaxShownNameBytes = 64;

std::string Shown(std::string_view name) { return LogQuote(name.substr(0, kMaxShownNameBytes)); }

Status NoIntegration(std::string_view name) {
  return NotFound("no integration " + Shown(name) + " for this VM's owner");
}

}  // namespace

Result<ResolvedIntegration> ResolveIntegration(Store& store, const SecretKey& key,
                                               std::string_view vm_id, std::string_view name) {
  if (!CheckIntegrationName(name).ok()) return NoIntegration(name);
  Result<VmRecord> vm = store.GetVm(vm_id);
  if (!vm.ok()) {
    if (vm.status().code() == Code::kNotFound) return NoIntegration(name);
    return vm.status();
  }
  Result<IntegrationRecord> integration = store.GetIntegration(vm->owner, name);
  if (!integration.ok()) {
    if (integration.status().code() == Code::kNotFound) return NoIntegration(name);
    return integration.status();
  }
  if (!IntegrationAppliesTo(*integration, *vm)) {
    return PermissionDenied("integration " + std::string(name) + " is not attached to VM " +
                            vm->name);
  }
  WARREN_ASSIGN_OR_RETURN(TargetUrl target, ParseTargetUrl(integration->target));
  WARREN_ASSIGN_OR_RETURN(IntegrationSecrets secrets, OpenIntegrationSecrets(key, *integration));
  ResolvedIntegration out;
  out.name = integration->name;
  out.owner = integration->owner;
  out.vm_id = vm->id;
  out.target = std::move(target);
  out.headers = std::move(secrets.headers);
  if (!secrets.bearer.empty()) {
    out.headers.emplace_back("Authorization", "Bearer " + secrets.bearer);
  }
  out.sets_authorization = std::any_of(out.headers.begin(), out.headers.end(), [](const auto& h) {
    return EqualsIgnoreCase(h.first, "authorization");
  });
  out.fingerprint = integration->fingerprint;
  return out;
}

std::vector<std::string> IntegrationNamesFor(Store& store, std::string_view vm_id) {
  Result<VmRecord> vm = store.GetVm(vm_id);
  if (!vm.ok()) {
    if (vm.status().code() != Code::kNotFound) {
      LogWarn("integrations: reading VM " + Shown(vm_id) + ": " + LogQuote(vm.status().ToString()));
    }
    return {};
  }
  Result<std::vector<IntegrationRecord>> all = store.ListIntegrations(vm->owner);
  if (!all.ok()) {
    LogWarn("integrations: listing " + LogQuote(vm->owner) +
            "'s: " + LogQuote(all.status().ToString()));
    return {};
  }
  std::vector<std::string> names;
  for (const IntegrationRecord& i : *all) {
    if (IntegrationAppliesTo(i, *vm)) names.push_back(i.name);
  }
  return names;  // ListIntegrations yields name order
}

}  // namespace warren
