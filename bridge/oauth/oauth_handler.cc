#include "bridge/oauth/oauth_handler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/oauth.h"
#include "keys/store.h"
#include "keys/token.h"
#include "lobby/base/clock.h"
#include "lobby/base/log.h"
#include "lobby/base/utf8.h"

namespace warren {
namespace {

using oauth::OAuthErrorBody;

constexpr std::string_view kWellKnownResource = "/.well-known/oauth-protected-resource";
constexpr std::string_view kWellKnownServer = "/.well-known/oauth-authorization-server";

HttpHeaders JsonHeaders() {
  return {{"Content-Type", "application/json"},
          {"Cache-Control", "no-store"},
          {"Access-Control-Allow-Origin", "*"},
          {"X-Content-Type-Options", "nosniff"}};
}

void RespondJson(HttpResponder& res, int status, const nlohmann::json& body) {
  res.Respond(status, JsonHeaders(),
              body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

// An RFC 6749 §5.2 error.
void RespondOAuthError(HttpResponder& res, int status, std::string_view code,
                       std::string_view description) {
  res.Respond(status, JsonHeaders(), OAuthErrorBody(code, description));
}

// A 429 for a source over its rate, with when to try again.
void RespondRateLimited(HttpResponder& res, const RateLimiter& limiter, std::string_view what) {
  HttpHeaders headers = JsonHeaders();
  headers.emplace_back("Retry-After",
                       std::to_string(static_cast<int>(std::ceil(1 / limiter.rate()))));
  res.Respond(
      429, std::move(headers),
      OAuthErrorBody("temporarily_unavailable", "too many " + std::string(what) +
                                                    " from your address; try again in a minute"));
}

// A fresh CSP nonce.
std::string Nonce() {
  Result<std::string> n = NewSecret(16);
  return n.ok() ? *n : "warren";
}

HttpHeaders PageHeaders(const std::string& nonce) {
  return {{"Content-Type", "text/html; charset=utf-8"},
          {"Cache-Control", "no-store"},
          {"Content-Security-Policy", oauth::PageCsp(nonce)},
          {"X-Frame-Options", "DENY"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Content-Type-Options", "nosniff"}};
}

void RespondErrorPage(HttpResponder& res, int status, std::string_view title,
                      std::string_view message) {
  std::string nonce = Nonce();
  res.Respond(status, PageHeaders(nonce), oauth::RenderErrorPage(title, message, nonce));
}

std::string QueryOf(std::string_view target) {
  size_t q = target.find('?');
  return q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
}

std::string Param(const std::map<std::string, std::string>& form, const std::string& key) {
  auto it = form.find(key);
  return it == form.end() ? std::string() : it->second;
}

// "oauth-<slug of the client name>": the label prefix of a client's sign-ins.
std::string LabelStem(std::string_view client_name) {
  std::string slug;
  for (char c : client_name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      slug.push_back(c);
    } else if (!slug.empty() && slug.back() != '-') {
      slug.push_back('-');
    }
    if (slug.size() >= 24) break;
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.empty()) slug = "client";
  return "oauth-" + slug;
}

// The access token's limits: the grant's, expiring within the hour.
Scope AccessScope(const Scope& grant, int64_t now) {
  Scope s = grant;
  int64_t hour = now + kAccessTokenSeconds;
  if (s.expires_at == 0 || s.expires_at > hour) s.expires_at = hour;
  return s;
}

}  // namespace

OAuthHandler::OAuthHandler(Store& store, OAuthStore& oauth, const TokenSigner& signer,
                           const Clock& clock, OAuthOptions options)
    : store_(store),
      oauth_(oauth),
      signer_(signer),
      clock_(clock),
      options_(std::move(options)),
      base_urls_{options_.public_url},
      registrations_(options_.registrations_per_minute / 60, options_.registrations_per_minute),
      sign_ins_(options_.sign_ins_per_minute / 60, options_.sign_ins_per_minute) {}

oauth::Urls OAuthHandler::urls() const {
  std::lock_guard lock(urls_mu_);
  return base_urls_;
}

void OAuthHandler::SetPublicUrl(std::string base) {
  std::lock_guard lock(urls_mu_);
  base_urls_.base = std::move(base);
}

bool OAuthHandler::Matches(std::string_view path) const {
  return path.starts_with(kWellKnownResource) || path == kWellKnownServer ||
         path.starts_with("/oauth/");
}

void OAuthHandler::Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  HttpResponder& res = *responder;
  const std::string& path = request.path;
  const std::string& method = request.method;
  if (method == "OPTIONS") {
    // CORS preflight for browser-based clients (metadata, registration, token).
    return res.Respond(204,
                       {{"Access-Control-Allow-Origin", "*"},
                        {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                        {"Access-Control-Allow-Headers",
                         "Content-Type, Authorization, "
                         "MCP-Protocol-Version"},
                        {"Access-Control-Max-Age", "600"}},
                       "");
  }
  auto only = [&](std::string_view m) {
    if (method == m || (m == "GET" && method == "HEAD")) return true;
    RespondOAuthError(res, 405, "invalid_request", "use " + std::string(m));
    return false;
  };
  if (path.starts_with(kWellKnownResource)) {
    if (only("GET")) ProtectedResource(request, res);
  } else if (path == kWellKnownServer) {
    if (only("GET")) AuthorizationServer(res);
  } else if (path == "/oauth/register") {
    if (only("POST")) Register(request, res);
  } else if (path == "/oauth/authorize") {
    if (only("GET")) Authorize(request, res);
  } else if (path == "/oauth/status") {
    if (only("POST")) PollStatus(request, res);
  } else if (path == "/oauth/token") {
    if (only("POST")) Token(request, res);
  } else {
    RespondOAuthError(res, 404, "invalid_request", "no such endpoint");
  }
}

void OAuthHandler::ProtectedResource(const HttpRequest& req, HttpResponder& res) {
  const oauth::Urls u = urls();
  std::string_view suffix = std::string_view(req.path).substr(kWellKnownResource.size());
  if (suffix != "" && suffix != "/mcp" && suffix != "/mcp/claude" && suffix != "/mcp/openai") {
    return RespondOAuthError(res, 404, "invalid_request", "no protected resource there");
  }
  RespondJson(res, 200,
              {{"resource", u.base + std::string(suffix)},
               {"authorization_servers", {u.base}},
               {"bearer_methods_supported", {"header"}},
               {"resource_name", "warren"}});
}

void OAuthHandler::AuthorizationServer(HttpResponder& res) {
  const oauth::Urls u = urls();
  RespondJson(res, 200,
              {{"issuer", u.base},
               {"authorization_endpoint", u.authorization_endpoint()},
               {"token_endpoint", u.token_endpoint()},
               {"registration_endpoint", u.registration_endpoint()},
               {"response_types_supported", {"code"}},
               {"response_modes_supported", {"query"}},
               {"grant_types_supported", {"authorization_code", "refresh_token"}},
               {"code_challenge_methods_supported", {"S256"}},
               {"token_endpoint_auth_methods_supported", {"none"}},
               {"authorization_response_iss_parameter_supported", true}});
}

void OAuthHandler::Register(const HttpRequest& req, HttpResponder& res) {
  if (!registrations_.Allow(req.source)) {
    return RespondRateLimited(res, registrations_, "client registrations");
  }
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) {
    return RespondOAuthError(res, 400, "invalid_client_metadata", "the body must be a JSON object");
  }
  auto uris = body.find("redirect_uris");
  if (uris == body.end() || !uris->is_array() || uris->empty()) {
    return RespondOAuthError(res, 400, "invalid_redirect_uri", "redirect_uris is required");
  }
  if (uris->size() > kMaxRedirectUris) {
    return RespondOAuthError(res, 400, "invalid_redirect_uri",
                             "at most " + std::to_string(kMaxRedirectUris) + " redirect_uris");
  }
  OAuthClient client;
  for (const auto& u : *uris) {
    if (!u.is_string()) {
      return RespondOAuthError(res, 400, "invalid_redirect_uri", "redirect_uris are strings");
    }
    Status st = ValidateRedirectUri(u.get<std::string>());
    if (!st.ok()) return RespondOAuthError(res, 400, "invalid_redirect_uri", st.message());
    client.redirect_uris.push_back(u.get<std::string>());
  }
  client.name = "MCP client";
  if (auto n = body.find("client_name"); n != body.end() && !n->is_null()) {
    if (!n->is_string()) {
      return RespondOAuthError(res, 400, "invalid_client_metadata", "client_name is a string");
    }
    Status st = ValidateClientName(n->get<std::string>());
    if (!st.ok()) return RespondOAuthError(res, 400, "invalid_client_metadata", st.message());
    client.name = n->get<std::string>();
  }
  auto subset = [&](const char* field, std::set<std::string> allowed) -> Status {
    auto it = body.find(field);
    if (it == body.end() || it->is_null()) return Status::Ok();
    if (!it->is_array() || it->size() > 8) return InvalidArgument(std::string(field) + ": a list");
    for (const auto& v : *it) {
      if (!v.is_string() || !allowed.count(v.get<std::string>())) {
        return InvalidArgument(std::string(field) + ": unsupported value");
      }
    }
    return Status::Ok();
  };
  if (Status st = subset("grant_types", {"authorization_code", "refresh_token"}); !st.ok()) {
    return RespondOAuthError(res, 400, "invalid_client_metadata", st.message());
  }
  if (Status st = subset("response_types", {"code"}); !st.ok()) {
    return RespondOAuthError(res, 400, "invalid_client_metadata", st.message());
  }
  if (auto m = body.find("token_endpoint_auth_method"); m != body.end() && !m->is_null()) {
    if (!m->is_string() ||
        (*m != "none" && *m != "client_secret_post" && *m != "client_secret_basic")) {
      return RespondOAuthError(res, 400, "invalid_client_metadata",
                               "token_endpoint_auth_method: this server has public clients "
                               "(\"none\") only");
    }
  }
  Result<std::string> id = NewClientId();
  if (!id.ok()) return RespondOAuthError(res, 500, "server_error", "no client id");
  client.id = *id;
  client.created_at = clock_.NowUnix();
  client.source = req.source;
  if (Status st = oauth_.CreateOAuthClient(client); !st.ok()) {
    LogWarn("oauth: registering a client: " + st.ToString());
    int status = st.code() == Code::kLimitExceeded ? 429 : 500;
    return RespondOAuthError(res, status, "server_error", st.message());
  }
  LogInfo("oauth: registered client " + client.id + " " + LogQuote(client.name));
  // Public client (PKCE, no secret): the SDKs then authenticate with "none".
  RespondJson(res, 201,
              {{"client_id", client.id},
               {"client_id_issued_at", client.created_at},
               {"client_name", client.name},
               {"redirect_uris", client.redirect_uris},
               {"grant_types", {"authorization_code", "refresh_token"}},
               {"response_types", {"code"}},
               {"token_endpoint_auth_method", "none"}});
}

void OAuthHandler::Authorize(const HttpRequest& req, HttpResponder& res) {
  const oauth::Urls u = urls();
  Result<std::map<std::string, std::string>> parsed = oauth::ParseForm(QueryOf(req.target));
  if (!parsed.ok()) {
    return RespondErrorPage(res, 400, "Bad sign-in request", parsed.status().message());
  }
  const std::map<std::string, std::string>& q = *parsed;
  // Until client and redirect URI are known good, errors are shown here, never redirected.
  const std::string client_id = Param(q, "client_id");
  Result<OAuthClient> client = oauth_.GetOAuthClient(client_id);
  if (!client.ok()) {
    return RespondErrorPage(res, 400, "Unknown app",
                            "This app is not registered with this warren server (unknown "
                            "client_id). Remove the server from the app and add it again.");
  }
  const std::string redirect_uri = Param(q, "redirect_uri");
  if (std::find(client->redirect_uris.begin(), client->redirect_uris.end(), redirect_uri) ==
      client->redirect_uris.end()) {
    return RespondErrorPage(res, 400, "Wrong redirect address",
                            "The redirect_uri is not one this app registered; the sign-in "
                            "stops here.");
  }
  const std::string state = Param(q, "state");
  auto fail = [&](std::string_view error, std::string_view description) {
    std::map<std::string, std::string> params = {{"error", std::string(error)},
                                                 {"error_description", std::string(description)},
                                                 {"iss", u.base}};
    if (!state.empty() && state.size() <= kMaxStateBytes) params["state"] = state;
    res.Respond(
        302,
        {{"Location", oauth::AppendQuery(redirect_uri, params)}, {"Cache-Control", "no-store"}},
        "");
  };
  if (Param(q, "response_type") != "code") {
    return fail("unsupported_response_type", "response_type must be code");
  }
  if (Param(q, "code_challenge_method") != "S256") {
    return fail("invalid_request", "PKCE with code_challenge_method=S256 is required");
  }
  if (Status st = ValidateCodeChallenge(Param(q, "code_challenge")); !st.ok()) {
    return fail("invalid_request", st.message());
  }
  if (state.size() > kMaxStateBytes) return fail("invalid_request", "state is too long");
  // The store keeps text as UTF-8 only: a state of other bytes would fail there, as a 500.
  if (!IsValidUtf8(state)) return fail("invalid_request", "state must be UTF-8 text");
  Result<std::string> resource = oauth::CanonicalResource(u, Param(q, "resource"));
  if (!resource.ok()) return fail("invalid_target", resource.status().message());

  if (!sign_ins_.Allow(req.source)) {
    return RespondErrorPage(res, 429, "Too many sign-ins",
                            "Too many sign-ins were started from your address; try again in a "
                            "minute.");
  }
  const int64_t now = clock_.NowUnix();
  OAuthRequest r;
  r.source = req.source;
  r.client_id = client->id;
  r.redirect_uri = redirect_uri;
  r.code_challenge = Param(q, "code_challenge");
  r.resource = *resource;
  r.state = state;
  r.created_at = now;
  r.expires_at = now + options_.user_code_seconds;
  std::string user_code, page_secret;
  Status created = Internal("no attempt");
  for (int attempt = 0; attempt < 4; ++attempt) {
    Result<std::string> code = NewUserCode();
    Result<std::string> secret = NewSecret();
    if (!code.ok() || !secret.ok()) break;
    user_code = *code;
    page_secret = *secret;
    r.user_code_hash = HashSecret(NormalizeUserCode(user_code).value());
    r.id = HashSecret(page_secret);
    created = oauth_.CreateOAuthRequest(r, now);
    if (created.code() != Code::kConflict) break;
  }
  if (!created.ok()) {
    if (created.code() == Code::kLimitExceeded) {
      return RespondErrorPage(res, 429, "Too many sign-ins", created.message());
    }
    LogError("oauth: storing a sign-in request: " + created.ToString());
    return RespondErrorPage(res, 500, "Sign-in failed", "The server could not store it.");
  }
  oauth::SignInPage page;
  page.user_code = user_code;
  const int port = options_.ssh_port ? options_.ssh_port() : 2222;
  // As the lobby's own hints: "ssh HOST" on port 22, "ssh -p PORT HOST" elsewhere.
  page.ssh_command = (port == 22 ? "ssh " : "ssh -p " + std::to_string(port) + " ") +
                     options_.ssh_host + " authorize " + user_code;
  page.client_name = client->name;
  page.redirect_host = UriHost(redirect_uri);
  page.page_secret = page_secret;
  page.nonce = Nonce();
  page.expires_in_seconds = static_cast<int>(options_.user_code_seconds);
  res.Respond(200, PageHeaders(page.nonce), oauth::RenderSignInPage(page));
}

void OAuthHandler::PollStatus(const HttpRequest& req, HttpResponder& res) {
  const oauth::Urls u = urls();
  if (req.body.empty() || req.body.size() > 128) {
    return RespondOAuthError(res, 400, "invalid_request", "send the page's secret");
  }
  const std::string id = HashSecret(req.body);
  const int64_t now = clock_.NowUnix();
  Result<OAuthRequest> r = oauth_.GetOAuthRequest(id);
  auto gone = [&](std::string_view status, std::string_view message) {
    RespondJson(res, 200, {{"status", status}, {"message", message}});
  };
  if (!r.ok()) {
    if (r.status().code() != Code::kNotFound) {
      return RespondOAuthError(res, 500, "server_error", "the store failed");
    }
    return gone("expired", "This sign-in expired or is unknown. Start again from the app.");
  }
  switch (r->phase) {
    case OAuthPhase::kPending:
      if (now >= r->expires_at) {
        return gone("expired", "This sign-in code expired. Start again from the app.");
      }
      return RespondJson(res, 200, {{"status", "pending"}, {"expires_in", r->expires_at - now}});
    case OAuthPhase::kDenied: {
      std::map<std::string, std::string> params = {
          {"error", "access_denied"}, {"error_description", "denied over SSH"}, {"iss", u.base}};
      if (!r->state.empty()) params["state"] = r->state;
      return RespondJson(res, 200,
                         {{"status", "denied"},
                          {"message", "This sign-in was denied."},
                          {"redirect", oauth::AppendQuery(r->redirect_uri, params)}});
    }
    case OAuthPhase::kCodeIssued:
    case OAuthPhase::kRedeemed:
      return gone("done", "This sign-in has completed already.");
    case OAuthPhase::kApproved:
      break;
  }
  Result<std::string> code = NewSecret();
  if (!code.ok()) return RespondOAuthError(res, 500, "server_error", "no randomness");
  Status st = oauth_.UpdateOAuthRequest(id, [&](OAuthRequest& req) -> Status {
    if (req.phase != OAuthPhase::kApproved) return Conflict("already completed");
    req.phase = OAuthPhase::kCodeIssued;
    req.code_hash = HashSecret(*code);
    req.code_expires_at = now + options_.auth_code_seconds;
    return Status::Ok();
  });
  if (!st.ok()) {
    if (st.code() == Code::kConflict) {
      return gone("done", "This sign-in has completed already.");
    }
    return RespondOAuthError(res, 500, "server_error", "the store failed");
  }
  std::map<std::string, std::string> params = {{"code", *code}, {"iss", u.base}};
  if (!r->state.empty()) params["state"] = r->state;
  RespondJson(res, 200,
              {{"status", "approved"}, {"redirect", oauth::AppendQuery(r->redirect_uri, params)}});
}

void OAuthHandler::Token(const HttpRequest& req, HttpResponder& res) {
  std::string_view type = req.Header("content-type");
  if (!type.starts_with("application/x-www-form-urlencoded")) {
    return RespondOAuthError(res, 400, "invalid_request",
                             "send application/x-www-form-urlencoded parameters");
  }
  Result<std::map<std::string, std::string>> form = oauth::ParseForm(req.body);
  if (!form.ok()) return RespondOAuthError(res, 400, "invalid_request", form.status().message());
  const std::string grant = Param(*form, "grant_type");
  if (grant == "authorization_code") return AuthorizationCodeGrant(*form, res);
  if (grant == "refresh_token") return RefreshGrant(*form, res);
  RespondOAuthError(res, 400, "unsupported_grant_type",
                    "grant_type must be authorization_code or refresh_token");
}

void OAuthHandler::AuthorizationCodeGrant(const std::map<std::string, std::string>& form,
                                          HttpResponder& res) {
  const oauth::Urls u = urls();
  const std::string code = Param(form, "code");
  const std::string verifier = Param(form, "code_verifier");
  const std::string redirect_uri = Param(form, "redirect_uri");
  const std::string client_id = Param(form, "client_id");
  if (code.empty() || verifier.empty() || redirect_uri.empty() || client_id.empty()) {
    return RespondOAuthError(res, 400, "invalid_request",
                             "code, code_verifier, redirect_uri and client_id are required");
  }
  Result<OAuthClient> client = oauth_.GetOAuthClient(client_id);
  if (!client.ok()) return RespondOAuthError(res, 401, "invalid_client", "unknown client_id");
  std::string resource;
  if (!Param(form, "resource").empty()) {
    Result<std::string> r = oauth::CanonicalResource(u, Param(form, "resource"));
    if (!r.ok()) return RespondOAuthError(res, 400, "invalid_target", r.status().message());
    resource = *r;
  }
  Result<OAuthRequest> found = oauth_.FindOAuthRequestByCode(HashSecret(code));
  if (!found.ok()) {
    return RespondOAuthError(res, 400, "invalid_grant", "unknown or expired authorization code");
  }
  const int64_t now = clock_.NowUnix();
  std::string error = "invalid_grant";
  bool reused = false;
  OAuthRequest granted;
  Status st = oauth_.UpdateOAuthRequest(found->id, [&](OAuthRequest& r) -> Status {
    if (r.phase == OAuthPhase::kRedeemed) {
      reused = true;
      granted = r;
      return InvalidArgument("this authorization code was already used");
    }
    if (r.phase != OAuthPhase::kCodeIssued || r.code_hash != HashSecret(code)) {
      return InvalidArgument("unknown authorization code");
    }
    if (now >= r.code_expires_at) return InvalidArgument("the authorization code expired");
    if (r.client_id != client_id) {
      return InvalidArgument("the authorization code was issued to another client");
    }
    if (r.redirect_uri != redirect_uri) {
      return InvalidArgument("redirect_uri differs from the authorization request's");
    }
    if (!resource.empty() && resource != r.resource) {
      error = "invalid_target";
      return InvalidArgument("resource differs from the authorization request's");
    }
    if (!VerifyPkceS256(verifier, r.code_challenge)) {
      return InvalidArgument("code_verifier does not match the code_challenge");
    }
    r.phase = OAuthPhase::kRedeemed;
    granted = r;
    return Status::Ok();
  });
  if (!st.ok()) {
    if (reused && !granted.label_id.empty()) {
      // RFC 6749 §4.1.2: a code used twice revokes what it was exchanged for.
      Status revoked = store_.RemoveTokenLabel(granted.user, granted.label_id);
      LogWarn("oauth: authorization code reused for client " + client_id +
              "; revoking its tokens: " + (revoked.ok() ? "done" : revoked.ToString()));
    }
    if (st.code() == Code::kInvalidArgument)
      return RespondOAuthError(res, 400, error, st.message());
    return RespondOAuthError(res, 500, "server_error", "the store failed");
  }

  // Mint: a label of its own, the access token under it, a refresh token for the family.
  std::lock_guard lock(mint_mu_);
  Result<std::vector<TokenLabel>> labels = store_.ListTokenLabels(granted.user);
  Result<std::vector<SshKey>> keys = store_.ListKeys(granted.user);
  if (!labels.ok() || !keys.ok()) {
    return RespondOAuthError(res, 400, "invalid_grant", "the approving user no longer exists");
  }
  std::set<std::string> taken;
  for (const TokenLabel& l : *labels) taken.insert(l.name);
  for (const SshKey& k : *keys) taken.insert(k.name);
  const std::string stem = LabelStem(client->name);
  std::string name;
  for (int n = 1; name.empty(); ++n) {
    std::string candidate = stem + "-" + std::to_string(n);
    if (!taken.count(candidate)) name = candidate;
  }
  Result<std::string> label_id = NewTokenLabelId();
  Result<std::string> refresh = NewSecret();
  if (!label_id.ok() || !refresh.ok()) {
    return RespondOAuthError(res, 500, "server_error", "no randomness");
  }
  TokenClaims claims{granted.user, *label_id, AccessScope(granted.scope, now), now,
                     granted.resource};
  Result<std::string> token = signer_.Sign(claims);
  if (!token.ok()) return RespondOAuthError(res, 500, "server_error", token.status().message());
  Result<TokenLabel> label =
      store_.RecordToken(granted.user, name, *label_id, IssuedToken{granted.scope, now}, now);
  if (!label.ok()) {
    LogWarn("oauth: recording the token of a sign-in: " + label.status().ToString());
    return RespondOAuthError(res, 400, "invalid_grant", label.status().message());
  }
  OAuthRefresh rec{HashSecret(*refresh), *label_id,     granted.user, client_id,
                   granted.resource,     granted.scope, now,          false};
  if (Status put = oauth_.PutOAuthRefresh(rec); !put.ok()) {
    return RespondOAuthError(res, 500, "server_error", "the store failed");
  }
  (void)oauth_.UpdateOAuthRequest(granted.id, [&](OAuthRequest& r) -> Status {
    r.label_id = *label_id;
    return Status::Ok();
  });
  if (Status used = oauth_.MarkOAuthClientUsed(client_id, now); !used.ok()) {
    LogWarn("oauth: recording a use of client " + client_id + ": " + used.ToString());
  }
  LogInfo("oauth: " + granted.user + " signed in client " + client_id + " as token label " + name);
  RespondJson(res, 200,
              {{"access_token", *token},
               {"token_type", "Bearer"},
               {"expires_in", claims.scope.expires_at - now},
               {"refresh_token", *refresh}});
}

void OAuthHandler::RefreshGrant(const std::map<std::string, std::string>& form,
                                HttpResponder& res) {
  const oauth::Urls u = urls();
  const std::string refresh = Param(form, "refresh_token");
  const std::string client_id = Param(form, "client_id");
  if (refresh.empty() || client_id.empty()) {
    return RespondOAuthError(res, 400, "invalid_request",
                             "refresh_token and client_id are required");
  }
  Result<OAuthClient> client = oauth_.GetOAuthClient(client_id);
  if (!client.ok()) return RespondOAuthError(res, 401, "invalid_client", "unknown client_id");
  if (!Param(form, "resource").empty()) {
    Result<std::string> r = oauth::CanonicalResource(u, Param(form, "resource"));
    if (!r.ok()) return RespondOAuthError(res, 400, "invalid_target", r.status().message());
  }
  Result<std::string> next = NewSecret();
  if (!next.ok()) return RespondOAuthError(res, 500, "server_error", "no randomness");
  const int64_t now = clock_.NowUnix();
  Result<OAuthRefresh> rotated =
      oauth_.RotateOAuthRefresh(HashSecret(refresh), client_id, HashSecret(*next), now);
  if (!rotated.ok()) {
    Code c = rotated.status().code();
    if (c == Code::kPermissionDenied) {
      LogWarn("oauth: a rotated refresh token was replayed for client " + client_id +
              "; the sign-in was revoked");
    }
    if (c == Code::kNotFound || c == Code::kInvalidArgument || c == Code::kPermissionDenied) {
      return RespondOAuthError(res, 400, "invalid_grant", rotated.status().message());
    }
    return RespondOAuthError(res, 500, "server_error", "the store failed");
  }
  if (now - client->last_used_at >= kOAuthClientUseGranularity) {
    (void)oauth_.MarkOAuthClientUsed(client_id, now);  // kept from expiring; best effort
  }
  TokenClaims claims{rotated->user, rotated->label_id, AccessScope(rotated->scope, now), now,
                     rotated->resource};
  Result<std::string> token = signer_.Sign(claims);
  if (!token.ok()) return RespondOAuthError(res, 500, "server_error", token.status().message());
  RespondJson(res, 200,
              {{"access_token", *token},
               {"token_type", "Bearer"},
               {"expires_in", claims.scope.expires_at - now},
               {"refresh_token", *next}});
}

}  // namespace warren
