// OAuthHandler: OAuth 2.1 for MCP clients, mounted on HttpServer (bridge/http_handler.h):
//
//   GET  /.well-known/oauth-protected-resource[/mcp[/…]]  RFC 9728 metadata
//   GET  /.well-known/oauth-authorization-server            RFC 8414 metadata
//   POST /oauth/register                                    RFC 7591 dynamic registration
//   GET  /oauth/authorize                                   the sign-in page (code + command)
//   POST /oauth/status                                      what the page polls
//   POST /oauth/token                                       code (PKCE S256) / refresh grants
//
// The user approves a sign-in over SSH (`authorize CODE`, lobby/commands/cmd_authorize.cc);
// the page learns it by polling and goes to the client's redirect URI with the code and
// state. The access token is an API token (keys/token.h) minted under a label of its own
// ("oauth-<client>-<n>"), bound to BASE/mcp as its audience; refresh tokens rotate and a
// replayed one revokes the sign-in (keys/oauth.h). Every record lives in the store, so a
// restart loses nothing.
//
// Abuse: registrations and sign-in pages are rate-limited per source (HttpRequest::source),
// and the store caps pending sign-ins per source and expires unused clients (keys/oauth.h),
// so one address cannot lock others out.
//
// Threading: Handle runs on the server's I/O threads; store calls are short LMDB
// transactions. Minting is serialised by a mutex so two redemptions never pick one label
// name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bridge/http_handler.h"
#include "bridge/oauth/oauth_web.h"
#include "bridge/rate_limiter.h"
#include "keys/oauth.h"

namespace warren {

class Store;
class OAuthStore;
class TokenSigner;
class Clock;

struct OAuthOptions {
  // The normalised public base, e.g. "http://127.0.0.1:8080"; may be set later with
  // SetPublicUrl (when the HTTP port is only known once bound).
  std::string public_url;
  std::string ssh_host = "localhost";
  // The SSH port shown in the command; read at each page so port 0 resolves.
  std::function<int()> ssh_port;
  // How long a sign-in page's code waits for `authorize`, and how long the authorization
  // code it turns into may wait to be redeemed.
  int64_t user_code_seconds = kOAuthRequestSeconds;
  int64_t auth_code_seconds = kOAuthCodeSeconds;
  // Per source, a minute: client registrations, and sign-in pages opened (each a pending
  // request in the store). Bursts of a minute's worth.
  double registrations_per_minute = 10;
  double sign_ins_per_minute = 20;
};

class OAuthHandler final : public HttpHandler {
 public:
  // Everything must outlive the handler.
  OAuthHandler(Store& store, OAuthStore& oauth, const TokenSigner& signer, const Clock& clock,
               OAuthOptions options);

  bool Matches(std::string_view path) const override;
  std::string route() const override { return "/oauth"; }
  size_t max_body_bytes() const override { return 16 * 1024; }
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override;

  // The server's URLs (its resource: urls().mcp_resource()). Thread-safe.
  oauth::Urls urls() const;
  void SetPublicUrl(std::string base);

 private:
  void ProtectedResource(const HttpRequest& req, HttpResponder& res);
  void AuthorizationServer(HttpResponder& res);
  void Register(const HttpRequest& req, HttpResponder& res);
  void Authorize(const HttpRequest& req, HttpResponder& res);
  void PollStatus(const HttpRequest& req, HttpResponder& res);
  void Token(const HttpRequest& req, HttpResponder& res);
  void AuthorizationCodeGrant(const std::map<std::string, std::string>& form, HttpResponder& res);
  void RefreshGrant(const std::map<std::string, std::string>& form, HttpResponder& res);

  Store& store_;
  OAuthStore& oauth_;
  const TokenSigner& signer_;
  const Clock& clock_;
  OAuthOptions options_;
  mutable std::mutex urls_mu_;
  oauth::Urls base_urls_;
  std::mutex mint_mu_;
  RateLimiter registrations_;
  RateLimiter sign_ins_;
};

}  // namespace warren
