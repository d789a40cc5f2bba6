// The rules of integrations (the record is IntegrationRecord in store.h): names, target
// URLs, the headers and bearer token an integration adds, attachments as stored, sealing
// the secrets with the integration key, and which VMs an integration applies to. One home
// for each rule: the store enforces them on every write, the commands check them first,
// and the proxy's access check (lobby/commands/integration_access.h) uses the same
// IntegrationAppliesTo. No message ever carries a secret's value. Pure functions and value
// types; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keys/secret_box.h"
#include "keys/store.h"
#include "lobby/base/ascii.h"
#include "lobby/base/status.h"
#include "lobby/base/target_url.h"

namespace warren {

inline constexpr std::string_view kHttpProxyKind = "http-proxy";
inline constexpr size_t kMaxIntegrationNameBytes = 40;
inline constexpr size_t kMaxIntegrationHeaders = 16;
inline constexpr size_t kMaxIntegrationAttachments = 256;
inline constexpr size_t kMaxHeaderNameBytes = 64;
inline constexpr size_t kMaxSecretBytes = 8192;  // one header value, or the bearer token
inline constexpr size_t kIntegrationFingerprintChars = 12;

// A DNS label, since it becomes NAME.int.DOMAIN: 1-40 of a-z, 0-9 and '-', neither first
// nor last a '-'.
Status CheckIntegrationName(std::string_view name);

// What an integration adds to each request. Every value is a secret.
struct IntegrationSecrets {
  std::vector<std::pair<std::string, std::string>> headers;  // name -> value, in order
  std::string bearer;                                        // empty: none
};

// A header name (an HTTP token, at most 64 bytes) that is not the proxy's to set: Host,
// Content-Length and the hop-by-hop headers (Connection, Keep-Alive, Proxy-*, TE, Trailer,
// Transfer-Encoding, Upgrade) are refused.
Status CheckHeaderName(std::string_view name);
// At least one secret's rules: visible ASCII with inner spaces or tabs, 1-8192 bytes for a
// header value; visible ASCII without spaces for a bearer token. Messages name the header,
// never the value.
Status CheckHeaderValue(std::string_view header_name, std::string_view value);
Status CheckBearer(std::string_view token);
// Each header and the bearer, at most kMaxIntegrationHeaders headers, no name twice (in any
// case), and no Authorization header beside a bearer.
Status CheckIntegrationSecrets(const IntegrationSecrets& secrets);

// Attachments as stored ("vm:ID", "tag:T", "all"; IntegrationRecord::attachments).
inline constexpr std::string_view kAttachAll = "all";
inline constexpr std::string_view kAttachVmPrefix = "vm:";
inline constexpr std::string_view kAttachTagPrefix = "tag:";
std::string VmAttachment(std::string_view vm_id);
std::string TagAttachment(std::string_view tag);
Status CheckStoredAttachment(std::string_view attachment);

// The whole record as the store accepts it: id, owner, name, kind, a normalised target,
// header names, a seal when there is anything sealed, a fingerprint, attachments (sorted,
// unique, at most kMaxIntegrationAttachments).
Status ValidateIntegrationRecord(const IntegrationRecord& integration);

// A fresh integration id: 128 random bits as 32 lowercase hex digits.
Result<std::string> NewIntegrationId();

// Checks `secrets` and seals them into `integration` (whose id must be set: the seal is
// bound to it): header_names, bearer, sealed and fingerprint.
Status SealIntegrationSecrets(const SecretKey& key, const IntegrationSecrets& secrets,
                              IntegrationRecord& integration);
// The secrets again. Internal when the seal does not open (another key, or altered).
Result<IntegrationSecrets> OpenIntegrationSecrets(const SecretKey& key,
                                                  const IntegrationRecord& integration);

// Whether `vm` may use `integration`: the same owner, and attached by the VM's id, by a tag
// the VM carries now, or to all.
bool IntegrationAppliesTo(const IntegrationRecord& integration, const VmRecord& vm);

}  // namespace warren
