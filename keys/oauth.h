// OAuth 2.1 sign-in for MCP clients, approved over SSH: the records (registered clients,
// pending sign-ins, refresh tokens), the store interface that keeps them (LmdbStore
// implements it, schema version 4), and the pure rules both the HTTP side (bridge/oauth/)
// and the `authorize` command use: redirect-URI and client-metadata validation, PKCE S256,
// the short user codes and the hashing of every secret before it is stored.
//
// The flow (docs/ARCHITECTURE.md, "OAuth"): a client registers (RFC 7591), opens
// /oauth/authorize in a browser; the page shows a user code and `ssh HOST authorize CODE`;
// the user runs that command, which approves the pending request with limits no wider than
// the user's own credential; the page, polling, receives the authorization code and goes
// to the client's redirect URI; the client redeems the code with its PKCE verifier for an
// API token (keys/token.h) bound to the resource it asked for, plus a rotating refresh
// token. Only SHA-256 hashes of user codes, authorization codes, page secrets and refresh
// tokens are stored.
//
// Records are value types; the OAuthStore implementation is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "keys/scope.h"
#include "lobby/base/status.h"

namespace warren {

// ---- Limits
inline constexpr size_t kMaxOAuthClients = 10000;
inline constexpr size_t kMaxPendingOAuthRequests = 1000;
// Pending sign-ins one source (bridge: an IPv4 address or IPv6 /64) may hold at once, so a
// flood from one place cannot fill kMaxPendingOAuthRequests for everyone.
inline constexpr size_t kMaxPendingOAuthRequestsPerSource = 10;
// A registered client that completes no sign-in within a day is removed, as is one
// unused (no sign-in, no refresh) for 90 days: registrations are free and anonymous, so
// they must not pile up for good.
inline constexpr int64_t kOAuthUnusedClientSeconds = 24 * 3600;
inline constexpr int64_t kOAuthIdleClientSeconds = 90 * 24 * 3600;
// A client's last use is written at most this often (a refresh every hour would otherwise
// write every hour).
inline constexpr int64_t kOAuthClientUseGranularity = 24 * 3600;
inline constexpr size_t kMaxClientNameBytes = 100;
inline constexpr size_t kMaxRedirectUris = 8;
inline constexpr size_t kMaxRedirectUriBytes = 1000;
inline constexpr size_t kMaxStateBytes = 1000;
inline constexpr int64_t kOAuthRequestSeconds = 600;  // a user code lives 10 minutes
inline constexpr int64_t kOAuthCodeSeconds = 60;      // an authorization code, 1 minute
inline constexpr int64_t kAccessTokenSeconds = 3600;  // an access token, 1 hour

struct OAuthClient {
  std::string id;  // "wc-" + 32 hex digits, random
  std::string name;
  std::vector<std::string> redirect_uris;  // exact strings; matched byte for byte
  int64_t created_at = 0;
  std::string source;        // where it registered from (for admins: `oauth clients list`)
  int64_t last_used_at = 0;  // its last sign-in or refresh (to a day); 0: never used
};

// Whether `client` is due for removal at `now` (kOAuthUnusedClientSeconds,
// kOAuthIdleClientSeconds).
bool OAuthClientExpired(const OAuthClient& client, int64_t now);

// What removing a client took with it.
struct OAuthClientRemoval {
  size_t requests = 0;        // its sign-ins in progress
  size_t refresh_tokens = 0;  // of its completed sign-ins…
  size_t token_labels = 0;    // …whose token labels (hence access tokens) went too
};

enum class OAuthPhase {
  kPending,   // waiting for `authorize CODE`
  kApproved,  // approved; the page has not fetched the authorization code yet
  kCodeIssued,
  kRedeemed,  // the code was exchanged for tokens
  kDenied,    // `authorize CODE --deny`
};
std::string_view OAuthPhaseName(OAuthPhase p);

// One sign-in: made when the browser opens /oauth/authorize, keyed by the hash of the
// secret only that page holds (it polls with it).
struct OAuthRequest {
  std::string id;              // HashSecret(page secret)
  std::string user_code_hash;  // HashSecret(NormalizeUserCode(code))
  std::string client_id;
  std::string redirect_uri;
  std::string code_challenge;  // S256
  std::string resource;        // RFC 8707; becomes the token's audience
  std::string state;           // passed back to the client untouched
  std::string source;          // where the browser opened the page from (per-source cap)
  int64_t created_at = 0;
  int64_t expires_at = 0;
  OAuthPhase phase = OAuthPhase::kPending;
  // Once approved: who, with which limits.
  std::string user;
  Scope scope;
  int64_t approved_at = 0;
  // Once the page fetched it: the authorization code's hash and expiry.
  std::string code_hash;
  int64_t code_expires_at = 0;
  // Once redeemed: the token label the tokens were minted under.
  std::string label_id;
};

// A refresh token. All refresh tokens of one sign-in form a family named by its token
// label: removing the label (`ssh-key remove`) revokes them; replaying a rotated one
// revokes the label and the family.
struct OAuthRefresh {
  std::string hash;      // HashSecret(refresh token)
  std::string label_id;  // the family
  std::string user;
  std::string client_id;
  std::string resource;
  Scope scope;  // the grant's limits (expiry: the grant's, 0 = never)
  int64_t issued_at = 0;
  bool used = false;  // rotated: presenting it again is a replay
};

class OAuthStore {
 public:
  virtual ~OAuthStore() = default;

  // Stores a new client, first removing expired ones (OAuthClientExpired at
  // client.created_at, with what RemoveOAuthClient takes). At kMaxOAuthClients the oldest
  // never-used client makes room, so a flood of registrations never locks out the clients
  // people use; LimitExceeded only when every client has been used. Conflict when the id
  // exists.
  virtual Status CreateOAuthClient(const OAuthClient& client) = 0;
  virtual Result<OAuthClient> GetOAuthClient(std::string_view id) = 0;  // NotFound
  // Every client, in id order.
  virtual Result<std::vector<OAuthClient>> ListOAuthClients() = 0;
  // Records a use (a sign-in or refresh) at `now`, at most once per
  // kOAuthClientUseGranularity. NotFound for an unknown client.
  virtual Status MarkOAuthClientUsed(std::string_view id, int64_t now) = 0;
  // Removes a client with its pending sign-ins, its refresh tokens and the token labels of
  // its sign-ins (revoking their access tokens), in one transaction. NotFound if unknown.
  virtual Result<OAuthClientRemoval> RemoveOAuthClient(std::string_view id) = 0;

  // Stores a new pending request, first dropping expired ones. LimitExceeded when its
  // source already has kMaxPendingOAuthRequestsPerSource pending. At the store's cap of
  // live requests (kMaxPendingOAuthRequests unless configured), the oldest pending one of the
  // source holding the most is dropped to make room (fair shares: a flood evicts itself first).
  // Conflict when the id or user code is taken.
  virtual Status CreateOAuthRequest(const OAuthRequest& request, int64_t now) = 0;
  virtual Result<OAuthRequest> GetOAuthRequest(std::string_view id) = 0;  // NotFound
  virtual Result<OAuthRequest> FindOAuthRequestByUserCode(std::string_view user_code_hash) = 0;
  virtual Result<OAuthRequest> FindOAuthRequestByCode(std::string_view code_hash) = 0;
  // Read-modify-write in one transaction; `change` must not call the store and may not
  // change id or user_code_hash. Setting code_hash indexes it. A non-OK status from
  // `change` abandons the update and is returned.
  virtual Status UpdateOAuthRequest(std::string_view id,
                                    const std::function<Status(OAuthRequest&)>& change) = 0;

  virtual Status PutOAuthRefresh(const OAuthRefresh& refresh) = 0;
  // Rotation in one transaction: the token `old_hash` must exist, belong to `client_id`,
  // not be used, and its label must still exist (else NotFound / InvalidArgument, nothing
  // changed). It is marked used and `new_hash` stored in its place; returns the record.
  // A used one is a replay: the label (every access token of the sign-in) and all its
  // refresh tokens are deleted, and PermissionDenied returned.
  virtual Result<OAuthRefresh> RotateOAuthRefresh(std::string_view old_hash,
                                                  std::string_view client_id,
                                                  std::string_view new_hash, int64_t now) = 0;
};

// ---- Pure rules

// Lowercase hex SHA-256 of `secret`: what the store keeps instead of a secret.
std::string HashSecret(std::string_view secret);
// `bytes` random bytes from the CSPRNG, base64url without padding.
Result<std::string> NewSecret(size_t bytes = 32);
// A client id: "wc-" + 32 hex digits.
Result<std::string> NewClientId();

// The alphabet of user codes: no 0/O, 1/I/L confusion.
inline constexpr std::string_view kUserCodeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";
// "KQ7M-X2PD": 8 characters of kUserCodeAlphabet (about 39 bits), from the CSPRNG.
Result<std::string> NewUserCode();
// What a user typed -> the canonical 8 characters (uppercase, '-' and spaces dropped), or
// InvalidArgument when it cannot be a user code.
Result<std::string> NormalizeUserCode(std::string_view typed);

// PKCE (RFC 7636) with S256 only: BASE64URL(SHA256(verifier)) == challenge, in constant
// time; the verifier must be 43-128 characters of [A-Za-z0-9-._~].
bool VerifyPkceS256(std::string_view verifier, std::string_view challenge);
// A challenge must look like one: 43 characters of base64url.
Status ValidateCodeChallenge(std::string_view challenge);

// A redirect URI a client may register: https://…, or http:// to a loopback host
// (localhost, 127.0.0.1, [::1]); no fragment, no userinfo, no spaces or control bytes, at
// most kMaxRedirectUriBytes.
Status ValidateRedirectUri(std::string_view uri);
// client_name: 1..kMaxClientNameBytes printable characters (UTF-8 allowed, no controls).
Status ValidateClientName(std::string_view name);
// The host[:port] of a URI, for display ("" when it has none).
std::string UriHost(std::string_view uri);

}  // namespace warren
