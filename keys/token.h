// API tokens: bearer credentials for the HTTP surfaces (/exec, MCP). A token is
//
//   "wr1." + base64url(payload JSON) + "." + base64url(HMAC-SHA256(secret, "wr1." + payload))
//
// and its payload carries its limits — {"v":1,"u":user,"l":label id,"c":[cmds],"t":tag,
// "e":expires_at,"i":issued_at} — so nobody can widen them without the server's secret.
// A token issued through OAuth also carries its audience, "a": the resource (RFC 8707) it
// was asked for, e.g. "https://HOST/mcp"; surfaces refuse a token bound to another audience.
// Tokens without "a" (ssh-key generate-api-key) are for every surface, as before. The
// secret (32 random bytes) lives in the data directory, mode 0600, made on first start and
// never logged. A valid signature is not enough: CheckToken also requires the token's label
// to exist and belong to its user (store.h, TokenLabel), the user to exist and the token
// not to have expired, so revocation and removal take effect on the next request.
//
// TokenSigner is immutable after creation and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keys/scope.h"
#include "keys/store.h"
#include "lobby/base/status.h"

namespace warren {

inline constexpr std::string_view kTokenPrefix = "wr1.";
// Longer input is refused before any decoding: a header line is bounded anyway, and a
// token with the most commands a scope allows still fits.
inline constexpr size_t kMaxTokenBytes = 12 * 1024;

struct TokenClaims {
  std::string user;
  std::string label_id;  // TokenLabel::id
  Scope scope;
  int64_t issued_at = 0;
  // The resource the token is bound to (OAuth, RFC 8707); empty: any surface.
  std::string audience;

  bool operator==(const TokenClaims&) const = default;
};

class TokenSigner {
 public:
  static constexpr size_t kSecretBytes = 32;

  // Reads the secret from `path`, or creates it (random, mode 0600, written atomically)
  // when the file does not exist. Refuses a file that others may read or that is not
  // exactly a secret of ours (Unavailable / Internal, naming the path, never the content).
  static Result<TokenSigner> LoadOrCreate(const std::string& path);
  // For tests: a signer over a given secret of at least kSecretBytes bytes.
  static Result<TokenSigner> FromSecret(std::string_view secret);

  // The token for `claims`. InvalidArgument when the claims are malformed or the token
  // would be longer than kMaxTokenBytes (too many commands).
  Result<std::string> Sign(const TokenClaims& claims) const;

  // Checks the form and the signature only (not expiry or revocation; see CheckToken).
  // Every failure is Unauthenticated with one message that does not say what was wrong
  // with it beyond "not a warren token" vs "invalid": a forger learns nothing.
  Result<TokenClaims> Verify(std::string_view token) const;

 private:
  explicit TokenSigner(std::string secret) : secret_(std::move(secret)) {}
  std::string Mac(std::string_view signed_part) const;

  std::string secret_;
};

// A fresh label id: 128 random bits as 32 lowercase hex digits.
Result<std::string> NewTokenLabelId();

// True when `text` has the token prefix (what a caller meant to send, valid or not).
inline bool LooksLikeToken(std::string_view text) { return text.starts_with(kTokenPrefix); }

// A token that passed every check, with the label and user as the store has them now.
struct CheckedToken {
  TokenClaims claims;
  TokenLabel label;
  User user;
};

// The whole check: signature, expiry, the label still present and owned by the token's
// user, the user still present. Unauthenticated for any of those ("token expired at …",
// "token revoked"); a store failure keeps its own code.
Result<CheckedToken> CheckToken(Store& store, const TokenSigner& signer, std::string_view token,
                                int64_t now_unix);

}  // namespace warren
