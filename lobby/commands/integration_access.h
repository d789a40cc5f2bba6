// What the integration proxy asks of the interpreter: which integration a request from a VM
// may use, with the secrets to add, and which integration names a VM's resolver should know.
// The VM is named by the proxy (from the socket or endpoint it came in on, never from what
// the VM says); its owner is the namespace of integration names; an integration applies to
// it when attached by its id, by a tag it carries now, or to all (IntegrationAppliesTo,
// keys/integration.h). The answer holds secrets: never log it, never send it to a VM.
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keys/integration.h"
#include "keys/secret_box.h"
#include "keys/store.h"
#include "lobby/base/status.h"

namespace warren {

struct ResolvedIntegration {
  std::string name;
  std::string owner;
  std::string vm_id;
  TargetUrl target;  // where to send it: the request's path and query go after path_prefix
  // The headers to add, in order, values decrypted (the bearer as "Authorization: Bearer
  // TOKEN"). The proxy replaces any header of the same name the VM sent.
  std::vector<std::pair<std::string, std::string>> headers;
  // Whether `headers` carries Authorization, so any the VM sent must be dropped.
  bool sets_authorization = false;
  std::string fingerprint;  // IntegrationRecord::fingerprint: safe to log, unlike the rest
};

// The integration `name` as the VM `vm_id` may use it. NotFound "no integration NAME for
// this VM's owner" (also for an unknown VM or a malformed name), PermissionDenied
// "integration NAME is not attached to VM X"; a store failure keeps its code; Internal when
// the secrets do not open with `key`. One line each, for the proxy's 403/404 body.
Result<ResolvedIntegration> ResolveIntegration(Store& store, const SecretKey& key,
                                               std::string_view vm_id, std::string_view name);

// The names of every integration the VM `vm_id` may use now, sorted (for the guest's
// /etc/hosts: NAME.int.DOMAIN). Empty for an unknown VM; on a store failure empty too, with
// a warning logged.
std::vector<std::string> IntegrationNamesFor(Store& store, std::string_view vm_id);

}  // namespace warren
