// Fuzzes API tokens (keys/token.h) and what they are made of. Input: one byte choosing the
// mode, then its text.
//   0: a bearer token as a client sends it: Verify refuses it (Unauthenticated) or, never
//      without our secret, accepts claims that sign back to the same token.
//   1: claims (lines: user, --cmds, tag, audience, expiry, issue time) that pass the rules
//      the product checks before it signs: Sign succeeds unless too long, Verify gives the
//      claims back, and changing any one byte of the token makes it invalid (one spelling).
//   2: the strict base64 decoders (keys/base64.h): what they accept is canonical.
//   3: a scope as JSON (Scope::FromJson): what it accepts round-trips through ToJson.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/base64.h"
#include "keys/scope.h"
#include "keys/token.h"
#include "lobby/base/user_name.h"
#include "lobby/base/utf8.h"
#include "tests/fuzz/check.h"

namespace {

using warren::Code;
using warren::Result;
using warren::fuzz::Fail;

const warren::TokenSigner& Signer() {
  static const warren::TokenSigner signer =
      warren::TokenSigner::FromSecret(std::string(warren::TokenSigner::kSecretBytes, 'k')).value();
  return signer;
}

std::vector<std::string_view> Lines(std::string_view text, size_t count) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < count) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;
    out.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  out.push_back(text);
  out.resize(count);
  return out;
}

int64_t Digits(std::string_view s) {
  int64_t v = 0;
  for (char c : s.substr(0, 15)) {
    if (c >= '0' && c <= '9') v = v * 10 + (c - '0');
  }
  return v;
}

void VerifyClientToken(std::string_view token) {
  Result<warren::TokenClaims> claims = Signer().Verify(token);
  if (!claims.ok()) {
    if (claims.status().code() != Code::kUnauthenticated) Fail(claims.status().ToString());
    return;
  }
  Result<std::string> again = Signer().Sign(*claims);
  if (!again.ok() || *again != token) Fail("an accepted token does not sign back to itself");
}

void SignAndVerify(std::string_view text) {
  std::vector<std::string_view> f = Lines(text, 6);
  warren::TokenClaims claims;
  claims.user = std::string(f[0]);
  if (!warren::CheckUserName(claims.user).ok()) return;
  claims.label_id = "00112233445566778899aabbccddeeff";
  if (!f[1].empty()) {
    Result<std::vector<std::string>> cmds = warren::ParseCommandList(f[1]);
    if (!cmds.ok()) return;
    claims.scope.cmds = *cmds;
  }
  claims.scope.tag = std::string(f[2]);
  if (!claims.scope.tag.empty() && !warren::ValidateTag(claims.scope.tag).ok()) return;
  claims.audience = std::string(f[3]);  // the server's own URL: operator configuration
  if (!warren::IsValidUtf8(claims.audience)) return;
  claims.scope.expires_at = Digits(f[4]);
  claims.issued_at = Digits(f[5]);

  Result<std::string> token = Signer().Sign(claims);
  if (!token.ok()) {
    if (token.status().code() != Code::kInvalidArgument) Fail(token.status().ToString());
    return;
  }
  if (token->size() > warren::kMaxTokenBytes) Fail("a token over kMaxTokenBytes");
  Result<warren::TokenClaims> back = Signer().Verify(*token);
  if (!back.ok() || !(*back == claims)) Fail("Verify(Sign(claims)) is not the claims");
  // One spelling: any change to any byte is refused.
  std::string changed = *token;
  size_t at = (text.size() * 31 + static_cast<size_t>(Digits(f[5]))) % changed.size();
  const char original = changed[at];
  for (char c : {'A', 'Q', '_', '-', '.', '0'}) {
    if (c == original) continue;
    changed[at] = c;
    if (Signer().Verify(changed).ok()) Fail("a changed token still verifies");
  }
}

void Base64Canonical(std::string_view text) {
  if (Result<std::string> b = warren::Base64Decode(text); b.ok()) {
    if (warren::Base64Encode(*b) != text) Fail("Base64Decode accepted a non-canonical text");
  }
  if (Result<std::string> b = warren::Base64UrlDecode(text); b.ok()) {
    if (warren::Base64UrlEncode(*b) != text) Fail("Base64UrlDecode accepted a non-canonical text");
  }
}

void ScopeRoundTrip(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  Result<warren::Scope> scope = warren::Scope::FromJson(j);
  if (!scope.ok()) return;
  Result<warren::Scope> again = warren::Scope::FromJson(scope->ToJson());
  if (!again.ok() || !(*again == *scope)) Fail("Scope does not round-trip through JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      VerifyClientToken(text);
      break;
    case 1:
      SignAndVerify(text);
      break;
    case 2:
      Base64Canonical(text);
      break;
    case 3:
      ScopeRoundTrip(text);
      break;
  }
  return 0;
}
