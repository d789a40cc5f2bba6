#include "keys/integration.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <charconv>

#include <nlohmann/json.hpp>

#include "keys/scope.h"
#include "keys/secret_file.h"
#include "keys/vm_rules.h"
#include "lobby/base/ascii.h"
#include "lobby/base/hex.h"

namespace warren {
namespace {

constexpr size_t kIdChars = 32;
constexpr int kSealVersion = 1;

bool IsVisible(char c) { return c > 0x20 && c < 0x7f; }

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if (IsAsciiAlpha(c) || IsAsciiDigit(c)) return true;
  static constexpr std::string_view kOther = "!#$%&'*+-.^_`|~";
  return kOther.find(c) != std::string_view::npos;
}

constexpr std::array<std::string_view, 11> kRefusedHeaders = {"host",
                                                              "content-length",
                                                              "transfer-encoding",
                                                              "connection",
                                                              "keep-alive",
                                                              "proxy-connection",
                                                              "proxy-authorization",
                                                              "proxy-authenticate",
                                                              "te",
                                                              "trailer",
                                                              "upgrade"};

std::string SealContext(const IntegrationRecord& integration) {
  return "warren integration " + integration.id;
}

// What the fingerprint covers: every name and value, and the bearer, in one unambiguous
// encoding (JSON's).
std::string FingerprintOf(const SecretKey& key, const IntegrationSecrets& secrets) {
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& [name, value] : secrets.headers) headers.push_back({AsciiLower(name), value});
  nlohmann::json all = {{"h", std::move(headers)}, {"b", secrets.bearer}};
  return HexEncode(key.Mac(all.dump())).substr(0, kIntegrationFingerprintChars);
}

}  // namespace

Status CheckIntegrationName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxIntegrationNameBytes && name.front() != '-' &&
            name.back() != '-';
  for (char c : name) ok = ok && (IsAsciiLower(c) || IsAsciiDigit(c) || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgument("integration name \"" + ShownUntrusted(name) +
                         "\" is not valid: 1-40 of a-z, 0-9 and '-', not starting or ending "
                         "with '-' (it becomes NAME.int.DOMAIN)");
}

Status CheckHeaderName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxHeaderNameBytes;
  for (char c : name) ok = ok && IsTokenChar(c);
  if (!ok) {
    return InvalidArgument("header name \"" + ShownUntrusted(name) +
                           "\" is not valid: 1-64 of letters, digits and !#$%&'*+-.^_`|~");
  }
  for (std::string_view refused : kRefusedHeaders) {
    if (EqualsIgnoreCase(name, refused)) {
      return InvalidArgument("the proxy sets " + std::string(name) +
                             " itself; an integration cannot add it");
    }
  }
  return Status::Ok();
}

Status CheckHeaderValue(std::string_view header_name, std::string_view value) {
  const std::string what = "the value of header " + ShownUntrusted(header_name);
  if (value.empty()) return InvalidArgument(what + " is empty");
  if (value.size() > kMaxSecretBytes) {
    return InvalidArgument(what + " is longer than " + std::to_string(kMaxSecretBytes) + " bytes");
  }
  if (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
      value.back() == '\t') {
    return InvalidArgument(what + " starts or ends with a space");
  }
  for (char c : value) {
    if (!IsVisible(c) && c != ' ' && c != '\t') {
      return InvalidArgument(what + " has a character outside visible ASCII, spaces and tabs");
    }
  }
  return Status::Ok();
}

Status CheckBearer(std::string_view token) {
  if (token.empty()) return InvalidArgument("the bearer token is empty");
  if (token.size() > kMaxSecretBytes) {
    return InvalidArgument("the bearer token is longer than " + std::to_string(kMaxSecretBytes) +
                           " bytes");
  }
  for (char c : token) {
    if (!IsVisible(c)) {
      return InvalidArgument(
          "the bearer token has a space or a character outside visible ASCII (give the token "
          "alone, without \"Bearer \")");
    }
  }
  return Status::Ok();
}

Status CheckIntegrationSecrets(const IntegrationSecrets& secrets) {
  if (secrets.headers.size() > kMaxIntegrationHeaders) {
    return InvalidArgument("at most " + std::to_string(kMaxIntegrationHeaders) + " headers");
  }
  for (size_t i = 0; i < secrets.headers.size(); ++i) {
    const auto& [name, value] = secrets.headers[i];
    WARREN_RETURN_IF_ERROR(CheckHeaderName(name));
    WARREN_RETURN_IF_ERROR(CheckHeaderValue(name, value));
    for (size_t j = 0; j < i; ++j) {
      if (EqualsIgnoreCase(secrets.headers[j].first, name)) {
        return InvalidArgument("header " + name + " is given twice");
      }
    }
    if (!secrets.bearer.empty() && EqualsIgnoreCase(name, "authorization")) {
      return InvalidArgument("--bearer sets Authorization; do not also give it with --header");
    }
  }
  if (!secrets.bearer.empty()) WARREN_RETURN_IF_ERROR(CheckBearer(secrets.bearer));
  return Status::Ok();
}

std::string VmAttachment(std::string_view vm_id) {
  return std::string(kAttachVmPrefix) + std::string(vm_id);
}

std::string TagAttachment(std::string_view tag) {
  return std::string(kAttachTagPrefix) + std::string(tag);
}

Status CheckStoredAttachment(std::string_view attachment) {
  if (attachment == kAttachAll) return Status::Ok();
  if (attachment.starts_with(kAttachVmPrefix)) {
    return CheckVmId(attachment.substr(kAttachVmPrefix.size()));
  }
  if (attachment.starts_with(kAttachTagPrefix)) {
    return ValidateTag(attachment.substr(kAttachTagPrefix.size()));
  }
  return InvalidArgument("attachment \"" + ShownUntrusted(attachment) +
                         "\" is not vm:ID, tag:T or all");
}

Status ValidateIntegrationRecord(const IntegrationRecord& integration) {
  bool id_ok = integration.id.size() == kIdChars;
  for (char c : integration.id) id_ok = id_ok && (IsAsciiDigit(c) || (c >= 'a' && c <= 'f'));
  if (!id_ok) return InvalidArgument("integration id must be 32 lowercase hex digits");
  if (integration.owner.empty()) return InvalidArgument("an integration needs an owner");
  WARREN_RETURN_IF_ERROR(CheckIntegrationName(integration.name));
  if (integration.kind != kHttpProxyKind) {
    return InvalidArgument("integration kind \"" + ShownUntrusted(integration.kind) + "\" is not " +
                           std::string(kHttpProxyKind));
  }
  WARREN_ASSIGN_OR_RETURN(TargetUrl url, ParseTargetUrl(integration.target));
  if (url.ToString() != integration.target) {
    return InvalidArgument("integration target must be stored normalised");
  }
  if (integration.header_names.size() > kMaxIntegrationHeaders) {
    return InvalidArgument("at most " + std::to_string(kMaxIntegrationHeaders) + " headers");
  }
  for (const std::string& name : integration.header_names) {
    WARREN_RETURN_IF_ERROR(CheckHeaderName(name));
  }
  if (integration.sealed.empty() != (integration.header_names.empty() && !integration.bearer)) {
    return InvalidArgument("an integration's secrets are sealed exactly when it has some");
  }
  bool fp_ok = integration.fingerprint.size() == kIntegrationFingerprintChars;
  for (char c : integration.fingerprint)
    fp_ok = fp_ok && (IsAsciiDigit(c) || (c >= 'a' && c <= 'f'));
  if (!fp_ok) return InvalidArgument("integration fingerprint must be 12 lowercase hex digits");
  if (integration.attachments.size() > kMaxIntegrationAttachments) {
    return InvalidArgument("an integration may have at most " +
                           std::to_string(kMaxIntegrationAttachments) + " attachments");
  }
  for (size_t i = 0; i < integration.attachments.size(); ++i) {
    WARREN_RETURN_IF_ERROR(CheckStoredAttachment(integration.attachments[i]));
    if (i > 0 && integration.attachments[i - 1] >= integration.attachments[i]) {
      return InvalidArgument("integration attachments must be sorted and unique");
    }
  }
  return Status::Ok();
}

Result<std::string> NewIntegrationId() {
  WARREN_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(kIdChars / 2));
  return HexEncode(bytes);
}

Status SealIntegrationSecrets(const SecretKey& key, const IntegrationSecrets& secrets,
                              IntegrationRecord& integration) {
  WARREN_RETURN_IF_ERROR(CheckIntegrationSecrets(secrets));
  if (integration.id.empty()) return Internal("sealing secrets for an integration without an id");
  integration.header_names.clear();
  nlohmann::json values = nlohmann::json::array();
  for (const auto& [name, value] : secrets.headers) {
    integration.header_names.push_back(name);
    values.push_back(value);
  }
  integration.bearer = !secrets.bearer.empty();
  integration.fingerprint = FingerprintOf(key, secrets);
  integration.sealed.clear();
  if (secrets.headers.empty() && secrets.bearer.empty()) return Status::Ok();
  nlohmann::json plain = {{"v", kSealVersion}, {"h", std::move(values)}, {"b", secrets.bearer}};
  std::string text = plain.dump();  // checked ASCII above, so dump cannot throw
  Result<std::string> sealed = key.Seal(text, SealContext(integration));
  OPENSSL_cleanse(text.data(), text.size());
  if (!sealed.ok()) return sealed.status();
  integration.sealed = std::move(sealed).value();
  return Status::Ok();
}

Result<IntegrationSecrets> OpenIntegrationSecrets(const SecretKey& key,
                                                  const IntegrationRecord& integration) {
  IntegrationSecrets secrets;
  if (integration.sealed.empty()) {
    if (!integration.header_names.empty() || integration.bearer) {
      return Internal("integration " + integration.name + " has secrets but no seal");
    }
    return secrets;
  }
  WARREN_ASSIGN_OR_RETURN(std::string text, key.Open(integration.sealed, SealContext(integration)));
  nlohmann::json plain = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  OPENSSL_cleanse(text.data(), text.size());
  const Status corrupt = Internal("the sealed secrets of integration " + integration.name +
                                  " are not in a form this warren reads");
  if (!plain.is_object() || plain.value("v", 0) != kSealVersion) return corrupt;
  auto h = plain.find("h");
  auto b = plain.find("b");
  if (h == plain.end() || !h->is_array() || h->size() != integration.header_names.size() ||
      b == plain.end() || !b->is_string()) {
    return corrupt;
  }
  for (size_t i = 0; i < h->size(); ++i) {
    if (!(*h)[i].is_string()) return corrupt;
    secrets.headers.emplace_back(integration.header_names[i], (*h)[i].get<std::string>());
  }
  secrets.bearer = b->get<std::string>();
  if (secrets.bearer.empty() == integration.bearer) return corrupt;
  return secrets;
}

bool IntegrationAppliesTo(const IntegrationRecord& integration, const VmRecord& vm) {
  if (integration.owner != vm.owner) return false;
  for (const std::string& a : integration.attachments) {
    if (a == kAttachAll) return true;
    if (a.starts_with(kAttachVmPrefix) && a.substr(kAttachVmPrefix.size()) == vm.id) return true;
    if (a.starts_with(kAttachTagPrefix) &&
        std::find(vm.tags.begin(), vm.tags.end(), a.substr(kAttachTagPrefix.size())) !=
            vm.tags.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace warren
