// Fuzzes the OAuth endpoints' pure parsing (bridge/oauth/oauth_web.h) and the OAuth rules they
// apply to what clients send (keys/oauth.h). Input: one byte choosing the mode, then its text.
//   0: a form or query (ParseForm): what it accepts re-encodes (UrlEncode, AppendQuery) to
//      the same parameters.
//   1: a --public-url (NormalizeBaseUrl, idempotent) and a `resource` parameter
//      (CanonicalResource: BASE/mcp or refused).
//   2: a redirect URI a client registers (ValidateRedirectUri, UriHost): an accepted one is
//      bounded, has no space, quote, control byte or fragment, and has a host.
//   3: a typed user code (NormalizeUserCode): 8 characters of the alphabet, idempotent.
//   4: PKCE (lines: verifier, challenge): a verifier that matches means a well-formed
//      challenge.
//   5: the sign-in and error pages with the text as client name and redirect host: no markup
//      from the text survives escaping.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "bridge/oauth/oauth_web.h"
#include "keys/oauth.h"
#include "tests/fuzz/check.h"

namespace {

using warren::Result;
using warren::fuzz::Fail;
namespace oauth = warren::oauth;
using Form = std::map<std::string, std::string>;

void FormRoundTrip(std::string_view text) {
  Result<Form> form = oauth::ParseForm(text);
  if (!form.ok()) return;
  std::string encoded;
  for (const auto& [k, v] : *form) {
    encoded += (encoded.empty() ? "" : "&") + oauth::UrlEncode(k) + "=" + oauth::UrlEncode(v);
  }
  Result<Form> again = oauth::ParseForm(encoded);
  if (!again.ok() || *again != *form) Fail("a form does not round-trip through UrlEncode");
  if (form->count("x") != 0) return;  // the query below has its own x
  std::string uri = oauth::AppendQuery("https://client.example/cb?x=1", *form);
  Result<Form> query = oauth::ParseForm(uri.substr(uri.find('?') + 1));
  if (!query.ok() || query->erase("x") != 1 || *query != *form) {
    Fail("AppendQuery does not carry the parameters");
  }
}

void BaseUrl(std::string_view text) {
  const oauth::Urls fixed{"https://warren.example"};
  Result<std::string> resource = oauth::CanonicalResource(fixed, text);
  if (resource.ok() && *resource != fixed.mcp_resource()) Fail("CanonicalResource: " + *resource);
  Result<std::string> base = oauth::NormalizeBaseUrl(text);
  if (!base.ok()) return;
  Result<std::string> again = oauth::NormalizeBaseUrl(*base);
  if (!again.ok() || *again != *base) Fail("NormalizeBaseUrl is not idempotent");
  oauth::Urls urls{*base};
  Result<std::string> own = oauth::CanonicalResource(urls, urls.mcp_resource() + "/claude");
  if (!own.ok() || *own != urls.mcp_resource()) Fail("a server refuses its own resource");
  oauth::WwwAuthenticate(urls);
}

void RedirectUri(std::string_view text) {
  std::string host = warren::UriHost(text);
  if (!warren::ValidateRedirectUri(text).ok()) return;
  if (text.size() > warren::kMaxRedirectUriBytes) Fail("an accepted redirect URI is too long");
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '<' || c == '>' || c == '#') {
      Fail("an accepted redirect URI holds a byte it must not");
    }
  }
  if (host.empty()) Fail("an accepted redirect URI has no host");
}

void UserCode(std::string_view text) {
  Result<std::string> code = warren::NormalizeUserCode(text);
  if (!code.ok()) return;
  if (code->size() != 8) Fail("a user code of " + std::to_string(code->size()));
  for (char c : *code) {
    if (warren::kUserCodeAlphabet.find(c) == std::string_view::npos) Fail("user code alphabet");
  }
  Result<std::string> again = warren::NormalizeUserCode(*code);
  if (!again.ok() || *again != *code) Fail("NormalizeUserCode is not idempotent");
}

void Pkce(std::string_view text) {
  size_t nl = text.find('\n');
  std::string_view verifier = text.substr(0, nl);
  std::string_view challenge = nl == std::string_view::npos ? "" : text.substr(nl + 1);
  bool valid = warren::ValidateCodeChallenge(challenge).ok();
  if (warren::VerifyPkceS256(verifier, challenge) && !valid) Fail("PKCE matched a bad challenge");
}

size_t Count(const std::string& s, char c) { return std::count(s.begin(), s.end(), c); }

void Pages(std::string_view text) {
  oauth::SignInPage page;
  page.user_code = "KQ7M-X2PD";
  page.ssh_command = "ssh -p 2222 warren.example authorize KQ7M-X2PD";
  page.page_secret = "c2VjcmV0";
  page.nonce = "bm9uY2U";
  const std::string plain = oauth::RenderSignInPage(page);
  page.client_name = std::string(text);
  page.redirect_host = std::string(text);
  const std::string html = oauth::RenderSignInPage(page);
  for (char c : {'<', '>', '"', '\''}) {
    if (Count(html, c) != Count(plain, c)) Fail(std::string("markup from a client name: ") + c);
  }
  const std::string error = oauth::RenderErrorPage(text, text, page.nonce);
  const std::string error_plain = oauth::RenderErrorPage("", "", page.nonce);
  if (Count(error, '<') != Count(error_plain, '<')) Fail("markup in an error page");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      FormRoundTrip(text);
      break;
    case 1:
      BaseUrl(text);
      break;
    case 2:
      RedirectUri(text);
      break;
    case 3:
      UserCode(text);
      break;
    case 4:
      Pkce(text);
      break;
    case 5:
      Pages(text);
      break;
  }
  return 0;
}
