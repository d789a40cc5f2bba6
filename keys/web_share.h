// The web's records: who may see a VM's pages (its share settings and share links) and
// browser sign-in (magic links from `ssh HOST browser`, browser sessions bound to one host,
// and the one-time tickets that carry a sign-in from the domain to one VM's host). The Store
// (store.h) keeps them; lobby/commands/web_access.h holds the rules that use them. Every
// secret — a share-link token, a magic link, a session id, a ticket — is kept only as its
// SHA-256 (HashSecret, keys/oauth.h). Value types and pure rules; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "keys/scope.h"
#include "lobby/base/status.h"

namespace warren {

// ---- Limits
inline constexpr int kDefaultRoutePort = 8000;
inline constexpr int kMinWebPort = 3000;
inline constexpr int kMaxWebPort = 9999;
inline constexpr size_t kMaxShareUsers = 100;      // users one VM is shared with
inline constexpr size_t kMaxShareLinks = 20;       // live share links of one VM
inline constexpr int64_t kMagicLinkSeconds = 300;  // `browser`'s link: 5 minutes, one use
inline constexpr int64_t kHostTicketSeconds = 60;  // a ticket from the domain to one host
inline constexpr int64_t kBrowserSessionSeconds = 7 * 24 * 3600;
// What one user may hold at once; past them the store answers LimitExceeded (expired ones
// are pruned first), so no user can grow the store without bound.
inline constexpr size_t kMaxMagicLinksPerUser = 10;
inline constexpr size_t kMaxBrowserSessionsPerUser = 500;  // domain and host sessions together
inline constexpr size_t kMaxHostTicketsPerUser = 100;

// Status 3000–9999 (InvalidArgument otherwise, naming the range).
Status CheckWebPort(int64_t port);

// A capability URL's record: whoever holds the token may see the VM's route port.
struct ShareLink {
  std::string id;            // 8 lowercase hex digits, unique within its VM; what people see
  std::string token_sha256;  // HashSecret(token); the token itself is shown once
  int64_t created_at = 0;
  std::string created_by;  // the user who made it
  int64_t use_count = 0;   // admitted visits (written in batches: web_access.h)
  int64_t last_used_at = 0;
};

// A VM's share settings, keyed by the VM's id: a rename keeps them, `rm` removes them with
// the VM, `cp` starts the copy with none. A VM without a record has the defaults below.
struct VmShare {
  std::string vm_id;
  bool is_public = false;
  int port = kDefaultRoutePort;    // the route port NAME.DOMAIN serves
  std::vector<std::string> users;  // warren user names, sorted, no duplicates
  std::vector<ShareLink> links;    // oldest first
};

// What a browser session acts as: the caller that ran `browser`, so a session of a key
// limited to a tag keeps that limit. Rebuilt into a Caller and re-checked against the store
// on every use (a removed key or label ends the session).
struct WebCredential {
  std::string user;
  std::string credential;       // Caller::credential: "key:SHA256:…" or "token:<label id>"
  std::string key_fingerprint;  // when a key
  std::string token_label_id;   // when a token
  Scope scope;                  // the token's signed limits (a key's are re-read from it)
};

// `ssh HOST browser`'s one-time link. Redeeming it deletes it (single use) in the
// transaction that makes the session.
struct MagicLink {
  std::string token_sha256;
  WebCredential credential;
  int64_t created_at = 0;
  int64_t expires_at = 0;
};

// A signed-in browser, bound to the one host its cookie was set for: the domain itself, or
// one VM's host ("web-one.warren.localhost"). Host sessions descend from a domain session
// through a ticket and share its sign_in_id, so signing out ends them together.
struct BrowserSession {
  std::string id_sha256;   // HashSecret(cookie value)
  std::string sign_in_id;  // 32 hex digits: the magic-link redemption it descends from
  WebCredential credential;
  std::string host;
  int64_t created_at = 0;
  int64_t expires_at = 0;
};

// One-time, short-lived: lets a domain session make a session for exactly `host`.
struct HostTicket {
  std::string token_sha256;
  std::string session_sha256;  // the domain session it was issued from
  std::string user;
  std::string host;
  int64_t expires_at = 0;
};

// A share link found by its token.
struct ShareLinkMatch {
  std::string vm_id;
  ShareLink link;
};

// A fresh link id: 8 lowercase hex digits from the CSPRNG.
Result<std::string> NewShareLinkId();
// A fresh sign-in id: 32 lowercase hex digits.
Result<std::string> NewSignInId();

// What every stored VmShare must satisfy (the store checks it on write): port in range,
// users sorted and unique with valid names and at most kMaxShareUsers, links well-formed,
// ids and hashes unique, at most kMaxShareLinks.
Status ValidateVmShare(const VmShare& share);

}  // namespace warren
