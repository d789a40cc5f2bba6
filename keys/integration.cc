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
#include "lobby/base/hex.h"

namespace warren {
namespace {

constexpr size_t kMaxHostBytes = 253;
constexpr size_t kMaxLabelBytes = 63;
constexpr size_t kIdChars = 32;
constexpr int kSealVersion = 1;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string LowerCopy(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

// Untrusted text cut short for a message. Only for what is not a secret.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out;
  for (char c : s.substr(0, kMax)) {
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  }
  return s.size() <= kMax ? out : out + "…";
}

// A DNS name: dot-separated labels of letters, digits and '-' (neither first nor last).
bool IsDnsName(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > kMaxLabelBytes || label.front() == '-' ||
        label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!IsLower(c) && !IsDigit(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

// RFC 3986 pchar, without percent-encoding (checked apart).
bool IsPathChar(char c) {
  if (IsAlpha(c) || IsDigit(c)) return true;
  static constexpr std::string_view kOther = "-._~!$&'()*+,;=:@/";
  return kOther.find(c) != std::string_view::npos;
}

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if (IsAlpha(c) || IsDigit(c)) return true;
  static constexpr std::string_view kOther = "!#$%&'*+-.^_`|~";
  return kOther.find(c) != std::string_view::npos;
}

bool IsVisible(char c) { return c > 0x20 && c < 0x7f; }

Status BadTarget(std::string_view why) {
  return InvalidArgument("target URL: " + std::string(why) +
                         " (expected http(s)://HOST[:PORT][/PATH], e.g. https://api.example.com)");
}

Result<std::string> ParseHost(std::string_view host) {
  if (host.empty()) return BadTarget("no host");
  if (host.front() == '[') {
    if (host.back() != ']') return BadTarget("an IPv6 address is written [ADDRESS]");
    std::string literal(host.substr(1, host.size() - 2));
    unsigned char buf[16];
    if (inet_pton(AF_INET6, literal.c_str(), buf) != 1) {
      return BadTarget("\"" + Shown(host) + "\" is not an IPv6 address");
    }
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, buf, text, sizeof text);  // one spelling per address
    return std::string(text);
  }
  std::string lower = LowerCopy(host);
  if (!IsDnsName(lower)) {
    return BadTarget("\"" + Shown(host) +
                     "\" is not a host name (letters, digits, '-' and dots) or an IP address");
  }
  // A name whose last label is all digits can only be meant as an IPv4 address.
  std::string_view last = std::string_view(lower).substr(lower.rfind('.') + 1);
  if (std::all_of(last.begin(), last.end(), IsDigit)) {
    unsigned char buf[4];
    if (inet_pton(AF_INET, lower.c_str(), buf) != 1) {
      return BadTarget("\"" + Shown(host) + "\" is not an IPv4 address");
    }
  }
  return lower;
}

Result<std::string> ParsePath(std::string_view path) {
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%') {
      if (i + 2 >= path.size() || !IsHex(path[i + 1]) || !IsHex(path[i + 2])) {
        return BadTarget("a '%' in the path must start an escape like %2F");
      }
      i += 2;
    } else if (!IsPathChar(c)) {
      return BadTarget("the path has a character URLs do not carry unescaped");
    }
  }
  std::string out(path);
  while (!out.empty() && out.back() == '/') out.pop_back();
  size_t start = 1;
  while (start <= out.size()) {
    size_t slash = out.find('/', start);
    std::string_view segment = std::string_view(out).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (segment == "." || segment == "..") return BadTarget("no \".\" or \"..\" in the path");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
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
  for (const auto& [name, value] : secrets.headers) headers.push_back({LowerCopy(name), value});
  nlohmann::json all = {{"h", std::move(headers)}, {"b", secrets.bearer}};
  return HexEncode(key.Mac(all.dump())).substr(0, kIntegrationFingerprintChars);
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

Status CheckIntegrationName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxIntegrationNameBytes && name.front() != '-' &&
            name.back() != '-';
  for (char c : name) ok = ok && (IsLower(c) || IsDigit(c) || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgument("integration name \"" + Shown(name) +
                         "\" is not valid: 1-40 of a-z, 0-9 and '-', not starting or ending "
                         "with '-' (it becomes NAME.int.DOMAIN)");
}

std::string TargetUrl::ToString() const {
  std::string out = scheme + "://";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const int default_port = scheme == "https" ? 443 : 80;
  if (port != 0 && port != default_port) out += ":" + std::to_string(port);
  return out + path_prefix;
}

Result<TargetUrl> ParseTargetUrl(std::string_view text) {
  if (text.empty()) return BadTarget("it is empty");
  if (text.size() > kMaxTargetUrlBytes) {
    return BadTarget("longer than " + std::to_string(kMaxTargetUrlBytes) + " bytes");
  }
  for (char c : text) {
    if (!IsVisible(c)) return BadTarget("no spaces or control characters");
  }
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) return BadTarget("no scheme");
  TargetUrl url;
  url.scheme = LowerCopy(text.substr(0, sep));
  if (url.scheme != "http" && url.scheme != "https") {
    return BadTarget("the scheme must be http or https, not \"" + Shown(url.scheme) + "\"");
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find('#') != std::string_view::npos) return BadTarget("no #fragment");
  if (rest.find('?') != std::string_view::npos) {
    return BadTarget("no ?query: a request's own query is passed on");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    // Said without echoing: what precedes '@' is a password.
    return BadTarget("no user:password@ in the URL; give secrets with --header or --bearer");
  }
  std::string_view host = authority;
  std::string_view port;
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || port.size() > 5 || ec != std::errc() || end != port.data() + port.size() ||
        value < 1 || value > 65535) {
      return BadTarget("the port must be 1-65535");
    }
    url.port = value;
  }
  WARREN_ASSIGN_OR_RETURN(url.host, ParseHost(host));
  WARREN_ASSIGN_OR_RETURN(url.path_prefix, ParsePath(path));
  if (url.port == (url.scheme == "https" ? 443 : 80)) url.port = 0;
  return url;
}

Status CheckHeaderName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxHeaderNameBytes;
  for (char c : name) ok = ok && IsTokenChar(c);
  if (!ok) {
    return InvalidArgument("header name \"" + Shown(name) +
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
  const std::string what = "the value of header " + Shown(header_name);
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
  return InvalidArgument("attachment \"" + Shown(attachment) + "\" is not vm:ID, tag:T or all");
}

Status ValidateIntegrationRecord(const IntegrationRecord& integration) {
  bool id_ok = integration.id.size() == kIdChars;
  for (char c : integration.id) id_ok = id_ok && (IsDigit(c) || (c >= 'a' && c <= 'f'));
  if (!id_ok) return InvalidArgument("integration id must be 32 lowercase hex digits");
  if (integration.owner.empty()) return InvalidArgument("an integration needs an owner");
  WARREN_RETURN_IF_ERROR(CheckIntegrationName(integration.name));
  if (integration.kind != kHttpProxyKind) {
    return InvalidArgument("integration kind \"" + Shown(integration.kind) + "\" is not " +
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
  for (char c : integration.fingerprint) fp_ok = fp_ok && (IsDigit(c) || (c >= 'a' && c <= 'f'));
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
