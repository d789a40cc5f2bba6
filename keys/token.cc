#include "keys/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <utility>

#include <nlohmann/json.hpp>

#include "keys/base64.h"
#include "keys/secret_file.h"
#include "lobby/base/hex.h"
#include "lobby/base/time_format.h"

namespace warren {
namespace {

constexpr int kPayloadVersion = 1;
constexpr SecretFileKind kSigningKeyFile = {"token signing key",
                                            "removing it, which revokes every API token"};

Status NotAToken() {
  return Unauthenticated("not a warren API token (they start with \"" + std::string(kTokenPrefix) +
                         "\")");
}

Status InvalidToken() { return Unauthenticated("invalid API token"); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool IsLabelId(std::string_view id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (HexValue(c) < 0) return false;
  }
  return true;
}

}  // namespace

Result<TokenSigner> TokenSigner::LoadOrCreate(const std::string& path) {
  WARREN_ASSIGN_OR_RETURN(std::string secret,
                          LoadOrCreateSecretFile(path, kSecretBytes, kSigningKeyFile));
  return TokenSigner(std::move(secret));
}

Result<TokenSigner> TokenSigner::FromSecret(std::string_view secret) {
  if (secret.size() < kSecretBytes) {
    return InvalidArgument("a token secret needs at least " + std::to_string(kSecretBytes) +
                           " bytes");
  }
  return TokenSigner(std::string(secret));
}

std::string TokenSigner::Mac(std::string_view signed_part) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

Result<std::string> TokenSigner::Sign(const TokenClaims& claims) const {
  if (claims.user.empty()) return InvalidArgument("a token needs a user");
  if (!IsLabelId(claims.label_id)) return InvalidArgument("a token needs a label id");
  if (claims.scope.expires_at < 0 || claims.issued_at < 0) {
    return InvalidArgument("a token's times must not be negative");
  }
  nlohmann::json payload = {{"v", kPayloadVersion},  {"u", claims.user},
                            {"l", claims.label_id},  {"c", claims.scope.cmds},
                            {"t", claims.scope.tag}, {"e", claims.scope.expires_at},
                            {"i", claims.issued_at}};
  if (!claims.audience.empty()) payload["a"] = claims.audience;
  std::string signed_part = std::string(kTokenPrefix) + Base64UrlEncode(payload.dump());
  std::string token = signed_part + "." + Base64UrlEncode(Mac(signed_part));
  if (token.size() > kMaxTokenBytes) {
    return InvalidArgument("the token would be longer than " + std::to_string(kMaxTokenBytes) +
                           " bytes; allow fewer commands");
  }
  return token;
}

Result<TokenClaims> TokenSigner::Verify(std::string_view token) const {
  if (!LooksLikeToken(token)) return NotAToken();
  if (token.size() > kMaxTokenBytes) return InvalidToken();
  size_t dot = token.rfind('.');
  if (dot == std::string_view::npos || dot < kTokenPrefix.size()) return InvalidToken();
  std::string_view signed_part = token.substr(0, dot);
  Result<std::string> mac = Base64UrlDecode(token.substr(dot + 1));
  if (!mac.ok()) return InvalidToken();
  // Signature first, in constant time: nothing of an unsigned payload is even parsed.
  const std::string expected = Mac(signed_part);
  if (mac->size() != expected.size() ||
      CRYPTO_memcmp(mac->data(), expected.data(), expected.size()) != 0) {
    return InvalidToken();
  }
  Result<std::string> payload_text = Base64UrlDecode(signed_part.substr(kTokenPrefix.size()));
  if (!payload_text.ok()) return InvalidToken();
  // Signed by us, so malformed content would be a bug of ours; still refuse, never throw.
  nlohmann::json p = nlohmann::json::parse(*payload_text, nullptr, /*allow_exceptions=*/false);
  if (!p.is_object() || p.value("v", 0) != kPayloadVersion) return InvalidToken();
  auto u = p.find("u");
  auto l = p.find("l");
  auto i = p.find("i");
  if (u == p.end() || !u->is_string() || l == p.end() || !l->is_string() || i == p.end() ||
      !i->is_number_integer()) {
    return InvalidToken();
  }
  TokenClaims claims;
  claims.user = u->get<std::string>();
  claims.label_id = l->get<std::string>();
  claims.issued_at = i->get<int64_t>();
  if (auto a = p.find("a"); a != p.end()) {
    if (!a->is_string() || a->get<std::string>().empty()) return InvalidToken();
    claims.audience = a->get<std::string>();
  }
  Result<Scope> scope =
      Scope::FromJson(nlohmann::json{{"cmds", p.value("c", nlohmann::json())},
                                     {"tag", p.value("t", nlohmann::json())},
                                     {"expires_at", p.value("e", nlohmann::json())}});
  if (!scope.ok() || claims.user.empty() || !IsLabelId(claims.label_id)) return InvalidToken();
  claims.scope = std::move(scope).value();
  return claims;
}

Result<std::string> NewTokenLabelId() {
  WARREN_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(16));
  return HexEncode(bytes);
}

Result<CheckedToken> CheckToken(Store& store, const TokenSigner& signer, std::string_view token,
                                int64_t now_unix) {
  WARREN_ASSIGN_OR_RETURN(TokenClaims claims, signer.Verify(token));
  if (claims.scope.Expired(now_unix)) {
    return Unauthenticated("this API token expired at " + FormatTime(claims.scope.expires_at));
  }
  Result<TokenLabel> label = store.GetTokenLabel(claims.label_id);
  if (!label.ok()) {
    if (label.status().code() == Code::kNotFound) {
      return Unauthenticated("this API token has been revoked (its label was removed)");
    }
    return label.status().Annotate("checking the token's label");
  }
  if (label->user != claims.user) {
    return Unauthenticated("this API token has been revoked (its label was removed)");
  }
  Result<User> user = store.GetUser(claims.user);
  if (!user.ok()) {
    if (user.status().code() == Code::kNotFound) {
      return Unauthenticated("this API token's user no longer exists");
    }
    return user.status().Annotate("checking the token's user");
  }
  return CheckedToken{std::move(claims), std::move(label).value(), std::move(user).value()};
}

}  // namespace warren
