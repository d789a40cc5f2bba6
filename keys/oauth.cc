#include "keys/oauth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "keys/base64.h"
#include "lobby/base/ascii.h"
#include "lobby/base/hex.h"

namespace warren {
namespace {

std::string Sha256(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return std::string(reinterpret_cast<const char*>(md), sizeof md);
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return Internal("the system random number generator failed");
  }
  return out;
}

bool IsBase64UrlChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string_view OAuthPhaseName(OAuthPhase p) {
  switch (p) {
    case OAuthPhase::kPending:
      return "pending";
    case OAuthPhase::kApproved:
      return "approved";
    case OAuthPhase::kCodeIssued:
      return "code_issued";
    case OAuthPhase::kRedeemed:
      return "redeemed";
    case OAuthPhase::kDenied:
      return "denied";
  }
  return "pending";
}

bool OAuthClientExpired(const OAuthClient& client, int64_t now) {
  if (client.last_used_at == 0) return now - client.created_at >= kOAuthUnusedClientSeconds;
  return now - client.last_used_at >= kOAuthIdleClientSeconds;
}

std::string HashSecret(std::string_view secret) { return HexEncode(Sha256(secret)); }

Result<std::string> NewSecret(size_t bytes) {
  WARREN_ASSIGN_OR_RETURN(std::string raw, RandomBytes(bytes));
  return Base64UrlEncode(raw);
}

Result<std::string> NewClientId() {
  WARREN_ASSIGN_OR_RETURN(std::string raw, RandomBytes(16));
  return "wc-" + HexEncode(raw);
}

Result<std::string> NewUserCode() {
  const size_t n = kUserCodeAlphabet.size();
  // Rejection sampling keeps every character equally likely.
  const unsigned limit = 256 - 256 % n;
  std::string code;
  while (code.size() < 8) {
    WARREN_ASSIGN_OR_RETURN(std::string raw, RandomBytes(16));
    for (unsigned char c : raw) {
      if (c >= limit || code.size() == 8) continue;
      code.push_back(kUserCodeAlphabet[c % n]);
    }
  }
  return code.substr(0, 4) + "-" + code.substr(4);
}

Result<std::string> NormalizeUserCode(std::string_view typed) {
  std::string out;
  if (typed.size() > 32) return InvalidArgument("that is not a sign-in code (like KQ7M-X2PD)");
  for (char c : typed) {
    if (c == '-' || c == ' ') continue;
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (kUserCodeAlphabet.find(c) == std::string_view::npos) {
      return InvalidArgument("that is not a sign-in code (like KQ7M-X2PD)");
    }
    out.push_back(c);
  }
  if (out.size() != 8) return InvalidArgument("that is not a sign-in code (like KQ7M-X2PD)");
  return out;
}

bool VerifyPkceS256(std::string_view verifier, std::string_view challenge) {
  if (verifier.size() < 43 || verifier.size() > 128) return false;
  for (char c : verifier) {
    bool ok = IsBase64UrlChar(c) || c == '.' || c == '~';
    if (!ok) return false;
  }
  const std::string expected = Base64UrlEncode(Sha256(verifier));
  return expected.size() == challenge.size() &&
         CRYPTO_memcmp(expected.data(), challenge.data(), expected.size()) == 0;
}

Status ValidateCodeChallenge(std::string_view challenge) {
  bool ok = challenge.size() == 43;
  for (char c : challenge) ok = ok && IsBase64UrlChar(c);
  if (ok) return Status::Ok();
  return InvalidArgument("code_challenge must be BASE64URL(SHA256(verifier)): 43 characters");
}

std::string UriHost(std::string_view uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return "";
  std::string_view rest = uri.substr(scheme + 3);
  size_t end = rest.find_first_of("/?#");
  return std::string(rest.substr(0, end));
}

Status ValidateRedirectUri(std::string_view uri) {
  if (uri.empty()) return InvalidArgument("redirect URI is empty");
  if (uri.size() > kMaxRedirectUriBytes) {
    return InvalidArgument("redirect URI longer than " + std::to_string(kMaxRedirectUriBytes) +
                           " bytes");
  }
  for (unsigned char c : uri) {
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '<' || c == '>' || c == '\\') {
      return InvalidArgument("redirect URI contains a space, quote or control character");
    }
  }
  if (uri.find('#') != std::string_view::npos) {
    return InvalidArgument("redirect URI must not have a fragment");
  }
  std::string lower = Lower(uri.substr(0, 8));
  bool https = lower.starts_with("https://");
  bool http = lower.starts_with("http://");
  if (!https && !http) {
    return InvalidArgument("redirect URI must be https://, or http:// to localhost");
  }
  std::string host = UriHost(uri);
  if (host.empty()) return InvalidArgument("redirect URI has no host");
  if (host.find('@') != std::string::npos) {
    return InvalidArgument("redirect URI must not carry user information");
  }
  // The authority is a host name, an IPv4 address or a bracketed IPv6 address, then at most
  // a port: nothing else may follow the host (a browser would read it another way).
  std::string h = Lower(host);
  std::string_view port;
  if (h.starts_with("[")) {
    size_t close = h.find(']');
    if (close == std::string::npos) return InvalidArgument("redirect URI has an unclosed [");
    for (char c : std::string_view(h).substr(1, close - 1)) {
      if (!IsAsciiHex(c) && c != ':' && c != '.') {
        return InvalidArgument("redirect URI's bracketed host is not an IPv6 address");
      }
    }
    std::string_view after = std::string_view(h).substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return InvalidArgument("redirect URI has text after its host");
    }
    port = std::string_view(host).substr(close + 1);
    h = h.substr(0, close + 1);
  } else {
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      port = std::string_view(host).substr(colon);
      h = h.substr(0, colon);
    }
    for (char c : h) {
      if (!IsAsciiAlpha(c) && !IsAsciiDigit(c) && c != '-' && c != '.') {
        return InvalidArgument("redirect URI's host has a character a host name cannot");
      }
    }
  }
  if (h.empty() || h == "[]") return InvalidArgument("redirect URI has no host");
  if (!port.empty()) {
    std::string_view digits = port.substr(1);
    bool ok = !digits.empty() && digits.size() <= 5;
    for (char c : digits) ok = ok && IsAsciiDigit(c);
    if (!ok || std::stoul(std::string(digits)) > 65535) {
      return InvalidArgument("redirect URI's port must be a number up to 65535");
    }
  }
  if (http) {
    if (h != "localhost" && h != "127.0.0.1" && h != "[::1]") {
      return InvalidArgument(
          "an http:// redirect URI must point to localhost, 127.0.0.1 or "
          "[::1]; use https:// otherwise");
    }
  }
  return Status::Ok();
}

Status ValidateClientName(std::string_view name) {
  if (name.empty()) return InvalidArgument("client_name is empty");
  if (name.size() > kMaxClientNameBytes) {
    return InvalidArgument("client_name longer than " + std::to_string(kMaxClientNameBytes) +
                           " bytes");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("client_name contains a control character");
  }
  return Status::Ok();
}

}  // namespace warren
