// The pure, socket-free parts of the OAuth endpoints: URL encoding, form and query parsing,
// the server's URLs (derived from its public base URL), the sign-in page's HTML, and the
// RFC 6749 error body. Unit-tested on their own (tests/unit/oauth_test.cc).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lobby/base/markup.h"
#include "lobby/base/status.h"

namespace warren::oauth {

// application/x-www-form-urlencoded: '+' is a space, %XX a byte. InvalidArgument for a
// malformed escape. A repeated parameter is InvalidArgument too (RFC 6749 §3.1: parameters
// must not be included more than once).
Result<std::map<std::string, std::string>> ParseForm(std::string_view text);
std::string UrlEncode(std::string_view text);  // everything but unreserved characters escaped

// `uri` with `params` appended to its query ('?' or '&').
std::string AppendQuery(std::string_view uri, const std::map<std::string, std::string>& params);

// The URLs of one server, from its public base ("https://warren.example", no trailing '/').
struct Urls {
  std::string base;

  std::string mcp_resource() const { return base + "/mcp"; }
  std::string resource_metadata() const {
    return base + "/.well-known/oauth-protected-resource/mcp";
  }
  std::string authorization_endpoint() const { return base + "/oauth/authorize"; }
  std::string token_endpoint() const { return base + "/oauth/token"; }
  std::string registration_endpoint() const { return base + "/oauth/register"; }
};

// Normalises a --public-url value: scheme http or https, a host, no path/query/fragment;
// a trailing '/' dropped.
Result<std::string> NormalizeBaseUrl(std::string_view url);

// The resource a token is bound to, from the `resource` parameter a client sent: warren
// protects one resource, BASE/mcp, whichever of its URLs the client names (BASE, BASE/,
// BASE/mcp, BASE/mcp/claude, BASE/mcp/openai); an absent one means it too. Anything else is
// InvalidArgument (RFC 8707 invalid_target).
Result<std::string> CanonicalResource(const Urls& urls, std::string_view requested);

// The 401 challenge of the MCP endpoints (RFC 9728 §5.1).
std::string WwwAuthenticate(const Urls& urls);

struct SignInPage {
  std::string user_code;    // "KQ7M-X2PD"
  std::string ssh_command;  // "ssh -p 2222 HOST authorize KQ7M-X2PD"
  std::string client_name;
  std::string redirect_host;
  std::string page_secret;  // what the page polls /oauth/status with
  std::string nonce;        // CSP nonce of the inline style and script
  int expires_in_seconds = 600;
};
std::string RenderSignInPage(const SignInPage& page);
// A page that only says what went wrong (bad client or redirect URI: never redirected).
std::string RenderErrorPage(std::string_view title, std::string_view message,
                            std::string_view nonce);
// The Content-Security-Policy header of those pages.
std::string PageCsp(std::string_view nonce);

// {"error": code, "error_description": description}
std::string OAuthErrorBody(std::string_view code, std::string_view description);

}  // namespace warren::oauth
