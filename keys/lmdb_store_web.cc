// LmdbStore's web records (schema version 7): vm_shares (VM id -> its share settings and
// links), share_links (link token hash -> VM id NUL link id), and the browser sign-in
// records web_magic_links, web_sessions and web_tickets, each keyed by the SHA-256 of its
// secret. Single use is one write transaction: the record is deleted where the session it
// buys is written, so of two concurrent redemptions exactly one finds it. Every creation
// prunes the expired sign-in records first, and per-user limits bound the live ones.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "keys/web_share.h"

namespace warren {
namespace {

using store_internal::Shown;

// ---- Codecs. Field names are the on-disk format.

nlohmann::json EncodeCredential(const WebCredential& c) {
  return {{"user", c.user},
          {"credential", c.credential},
          {"key_fingerprint", c.key_fingerprint},
          {"token_label_id", c.token_label_id},
          {"scope", c.scope.ToJson()}};
}

Result<WebCredential> DecodeCredential(const nlohmann::json& j) {
  WebCredential c;
  c.user = j.at("user").get<std::string>();
  c.credential = j.value("credential", std::string());
  c.key_fingerprint = j.value("key_fingerprint", std::string());
  c.token_label_id = j.value("token_label_id", std::string());
  if (auto it = j.find("scope"); it != j.end()) {
    WARREN_ASSIGN_OR_RETURN(c.scope, Scope::FromJson(*it));
  }
  return c;
}

nlohmann::json EncodeShare(const VmShare& s) {
  nlohmann::json links = nlohmann::json::array();
  for (const ShareLink& l : s.links) {
    links.push_back({{"id", l.id},
                     {"token_sha256", l.token_sha256},
                     {"created_at", l.created_at},
                     {"created_by", l.created_by},
                     {"use_count", l.use_count},
                     {"last_used_at", l.last_used_at}});
  }
  return {{"vm_id", s.vm_id},
          {"public", s.is_public},
          {"port", s.port},
          {"users", s.users},
          {"links", std::move(links)}};
}

Result<VmShare> DecodeShare(const nlohmann::json& j) {
  try {
    VmShare s;
    s.vm_id = j.at("vm_id").get<std::string>();
    s.is_public = j.value("public", false);
    s.port = j.value("port", kDefaultRoutePort);
    s.users = j.value("users", std::vector<std::string>{});
    for (const nlohmann::json& l : j.value("links", nlohmann::json::array())) {
      ShareLink link;
      link.id = l.at("id").get<std::string>();
      link.token_sha256 = l.at("token_sha256").get<std::string>();
      link.created_at = l.value("created_at", int64_t{0});
      link.created_by = l.value("created_by", std::string());
      link.use_count = l.value("use_count", int64_t{0});
      link.last_used_at = l.value("last_used_at", int64_t{0});
      s.links.push_back(std::move(link));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("share record: ") + e.what());
  }
}

nlohmann::json EncodeMagicLink(const MagicLink& m) {
  return {{"token_sha256", m.token_sha256},
          {"credential", EncodeCredential(m.credential)},
          {"created_at", m.created_at},
          {"expires_at", m.expires_at}};
}

Result<MagicLink> DecodeMagicLink(const nlohmann::json& j) {
  try {
    MagicLink m;
    m.token_sha256 = j.at("token_sha256").get<std::string>();
    WARREN_ASSIGN_OR_RETURN(m.credential, DecodeCredential(j.at("credential")));
    m.created_at = j.value("created_at", int64_t{0});
    m.expires_at = j.at("expires_at").get<int64_t>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("magic link record: ") + e.what());
  }
}

nlohmann::json EncodeSession(const BrowserSession& s) {
  return {{"id_sha256", s.id_sha256},
          {"sign_in_id", s.sign_in_id},
          {"credential", EncodeCredential(s.credential)},
          {"host", s.host},
          {"created_at", s.created_at},
          {"expires_at", s.expires_at}};
}

Result<BrowserSession> DecodeSession(const nlohmann::json& j) {
  try {
    BrowserSession s;
    s.id_sha256 = j.at("id_sha256").get<std::string>();
    s.sign_in_id = j.at("sign_in_id").get<std::string>();
    WARREN_ASSIGN_OR_RETURN(s.credential, DecodeCredential(j.at("credential")));
    s.host = j.at("host").get<std::string>();
    s.created_at = j.value("created_at", int64_t{0});
    s.expires_at = j.at("expires_at").get<int64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("browser session record: ") + e.what());
  }
}

nlohmann::json EncodeTicket(const HostTicket& t) {
  return {{"token_sha256", t.token_sha256},
          {"session_sha256", t.session_sha256},
          {"user", t.user},
          {"host", t.host},
          {"expires_at", t.expires_at}};
}

Result<HostTicket> DecodeTicket(const nlohmann::json& j) {
  try {
    HostTicket t;
    t.token_sha256 = j.at("token_sha256").get<std::string>();
    t.session_sha256 = j.at("session_sha256").get<std::string>();
    t.user = j.at("user").get<std::string>();
    t.host = j.at("host").get<std::string>();
    t.expires_at = j.at("expires_at").get<int64_t>();
    return t;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("host ticket record: ") + e.what());
  }
}

std::string LinkIndexValue(std::string_view vm_id, std::string_view link_id) {
  std::string v(vm_id);
  v.push_back('\0');
  v.append(link_id);
  return v;
}

// A table's keys whose records `pick` selects (collected first: a scan must not write to
// the table it walks).
Result<std::vector<std::string>> KeysWhere(lmdb::Txn& txn, const lmdb::JsonTable& table,
                                           const std::function<bool(const nlohmann::json&)>& pick) {
  std::vector<std::string> out;
  WARREN_RETURN_IF_ERROR(
      table.Scan(txn, "", [&](std::string_view key, nlohmann::json&& j) -> Result<bool> {
        if (pick(j)) out.emplace_back(key);
        return true;
      }));
  return out;
}

Status DeleteKeys(lmdb::Txn& txn, const lmdb::JsonTable& table,
                  const std::vector<std::string>& keys) {
  for (const std::string& k : keys) WARREN_RETURN_IF_ERROR(table.Delete(txn, k).status());
  return Status::Ok();
}

int64_t ExpiresAt(const nlohmann::json& j) { return j.value("expires_at", int64_t{0}); }
std::string UserOf(const nlohmann::json& j) {
  if (auto c = j.find("credential"); c != j.end() && c->is_object()) {
    return c->value("user", std::string());
  }
  return j.value("user", std::string());
}

// Deletes every expired magic link, session and ticket.
Status PruneSignIns(LmdbStoreState& s, lmdb::Txn& txn, int64_t now) {
  for (const lmdb::JsonTable* t : {&s.web_magic_links, &s.web_sessions, &s.web_tickets}) {
    WARREN_ASSIGN_OR_RETURN(
        std::vector<std::string> dead,
        KeysWhere(txn, *t, [&](const nlohmann::json& j) { return ExpiresAt(j) <= now; }));
    WARREN_RETURN_IF_ERROR(DeleteKeys(txn, *t, dead));
  }
  return Status::Ok();
}

Result<size_t> CountOfUser(lmdb::Txn& txn, const lmdb::JsonTable& table, std::string_view user) {
  WARREN_ASSIGN_OR_RETURN(
      std::vector<std::string> keys,
      KeysWhere(txn, table, [&](const nlohmann::json& j) { return UserOf(j) == user; }));
  return keys.size();
}

Result<std::optional<BrowserSession>> LiveSession(LmdbStoreState& s, lmdb::Txn& txn,
                                                  std::string_view id_sha256, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s.web_sessions.Get(txn, id_sha256));
  if (!j) return std::optional<BrowserSession>();
  WARREN_ASSIGN_OR_RETURN(BrowserSession session, DecodeSession(*j));
  if (session.expires_at <= now) return std::optional<BrowserSession>();
  return std::optional<BrowserSession>(std::move(session));
}

Status CheckSessionRoom(LmdbStoreState& s, lmdb::Txn& txn, std::string_view user) {
  WARREN_ASSIGN_OR_RETURN(size_t n, CountOfUser(txn, s.web_sessions, user));
  if (n >= kMaxBrowserSessionsPerUser) {
    return LimitExceeded(std::string(user) + " has " + std::to_string(n) +
                         " browser sessions, the most one user may have; end them with: "
                         "browser --revoke");
  }
  return Status::Ok();
}

// Ends the sessions whose sign_in_id is in `sign_ins` and the tickets issued from them.
Result<size_t> EndSignIns(LmdbStoreState& s, lmdb::Txn& txn, const std::set<std::string>& sign_ins,
                          std::string_view user) {
  std::set<std::string> ended;
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> sessions,
                          KeysWhere(txn, s.web_sessions, [&](const nlohmann::json& j) {
                            return (!user.empty() && UserOf(j) == user) ||
                                   sign_ins.count(j.value("sign_in_id", std::string()));
                          }));
  ended.insert(sessions.begin(), sessions.end());
  WARREN_RETURN_IF_ERROR(DeleteKeys(txn, s.web_sessions, sessions));
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> tickets,
                          KeysWhere(txn, s.web_tickets, [&](const nlohmann::json& j) {
                            return (!user.empty() && UserOf(j) == user) ||
                                   ended.count(j.value("session_sha256", std::string()));
                          }));
  WARREN_RETURN_IF_ERROR(DeleteKeys(txn, s.web_tickets, tickets));
  return sessions.size();
}

Status CheckSessionRecord(const BrowserSession& s) {
  if (s.id_sha256.size() != 64 || s.sign_in_id.empty() || s.host.empty() ||
      s.credential.user.empty()) {
    return InvalidArgument("a browser session needs its hash, sign-in, host and user");
  }
  return Status::Ok();
}

}  // namespace

namespace store_internal {

Status CreateWebTables(lmdb::Txn& txn) {
  return CreateTables(
      txn, {"vm_shares", "share_links", "web_magic_links", "web_sessions", "web_tickets"});
}

Status OpenWebTables(LmdbStoreState& s, lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(s.vm_shares, lmdb::JsonTable::Open(txn, "vm_shares", false));
  WARREN_ASSIGN_OR_RETURN(s.share_links, lmdb::JsonTable::Open(txn, "share_links", false));
  WARREN_ASSIGN_OR_RETURN(s.web_magic_links, lmdb::JsonTable::Open(txn, "web_magic_links", false));
  WARREN_ASSIGN_OR_RETURN(s.web_sessions, lmdb::JsonTable::Open(txn, "web_sessions", false));
  WARREN_ASSIGN_OR_RETURN(s.web_tickets, lmdb::JsonTable::Open(txn, "web_tickets", false));
  return Status::Ok();
}

}  // namespace store_internal

Status LmdbStoreState::DeleteVmShare(lmdb::Txn& txn, std::string_view vm_id) {
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, vm_shares.Get(txn, vm_id));
  if (!j) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(VmShare share, DecodeShare(*j));
  for (const ShareLink& l : share.links) {
    WARREN_RETURN_IF_ERROR(share_links.Delete(txn, l.token_sha256).status());
  }
  return vm_shares.Delete(txn, vm_id).status();
}

Status LmdbStoreState::DeleteUserWeb(lmdb::Txn& txn, std::string_view user) {
  WARREN_RETURN_IF_ERROR(EndSignIns(*this, txn, {}, user).status());
  WARREN_ASSIGN_OR_RETURN(
      std::vector<std::string> links,
      KeysWhere(txn, web_magic_links, [&](const nlohmann::json& j) { return UserOf(j) == user; }));
  WARREN_RETURN_IF_ERROR(DeleteKeys(txn, web_magic_links, links));
  // Drop the user from every VM shared with them.
  std::vector<std::pair<std::string, nlohmann::json>> changed;
  WARREN_RETURN_IF_ERROR(
      vm_shares.Scan(txn, "", [&](std::string_view key, nlohmann::json&& j) -> Result<bool> {
        auto users = j.value("users", std::vector<std::string>{});
        auto it = std::find(users.begin(), users.end(), user);
        if (it != users.end()) {
          users.erase(it);
          j["users"] = users;
          changed.emplace_back(std::string(key), std::move(j));
        }
        return true;
      }));
  for (const auto& [key, j] : changed) WARREN_RETURN_IF_ERROR(vm_shares.Put(txn, key, j));
  return Status::Ok();
}

Result<VmShare> LmdbStore::GetVmShare(std::string_view vm_id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s_->vms.Get(txn, vm_id));
  if (!vm) return NotFound("no VM with id " + Shown(vm_id));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->vm_shares.Get(txn, vm_id));
  if (!j) {
    VmShare defaults;
    defaults.vm_id = std::string(vm_id);
    return defaults;
  }
  return DecodeShare(*j);
}

Status LmdbStore::UpdateVmShare(std::string_view vm_id,
                                const std::function<Status(VmShare&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s_->vms.Get(txn, vm_id));
  if (!vm) return NotFound("no VM with id " + Shown(vm_id));
  VmShare share;
  share.vm_id = std::string(vm_id);
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->vm_shares.Get(txn, vm_id));
  if (j) {
    WARREN_ASSIGN_OR_RETURN(share, DecodeShare(*j));
  }
  VmShare updated = share;
  WARREN_RETURN_IF_ERROR(change(updated));
  if (updated.vm_id != share.vm_id) return InvalidArgument("UpdateVmShare may not change vm_id");
  WARREN_RETURN_IF_ERROR(ValidateVmShare(updated));
  for (const std::string& user : updated.users) {
    if (std::find(share.users.begin(), share.users.end(), user) != share.users.end()) continue;
    WARREN_ASSIGN_OR_RETURN(std::optional<User> u, s_->users.Get(txn, user));
    if (!u) return NotFound("no user named " + Shown(user));
  }
  std::set<std::string> kept;
  for (const ShareLink& l : updated.links) kept.insert(l.token_sha256);
  for (const ShareLink& l : share.links) {
    if (!kept.count(l.token_sha256)) {
      WARREN_RETURN_IF_ERROR(s_->share_links.Delete(txn, l.token_sha256).status());
    }
  }
  for (const ShareLink& l : updated.links) {
    const std::string value = LinkIndexValue(vm_id, l.id);
    WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> at,
                            s_->share_links.Get(txn, l.token_sha256));
    if (at && *at != value) return Conflict("that share link token is taken");
    if (!at) WARREN_RETURN_IF_ERROR(s_->share_links.Put(txn, l.token_sha256, value));
  }
  WARREN_RETURN_IF_ERROR(s_->vm_shares.Put(txn, vm_id, EncodeShare(updated)));
  return txn.Commit();
}

Result<ShareLinkMatch> LmdbStore::FindShareLink(std::string_view token_sha256) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> at, s_->share_links.Get(txn, token_sha256));
  if (!at || !at->is_string()) return NotFound("no such share link");
  const std::string value = at->get<std::string>();
  const size_t nul = value.find('\0');
  if (nul == std::string::npos) return Internal("share_links index entry is corrupt");
  ShareLinkMatch match;
  match.vm_id = value.substr(0, nul);
  const std::string link_id = value.substr(nul + 1);
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->vm_shares.Get(txn, match.vm_id));
  if (!j) return NotFound("no such share link");
  WARREN_ASSIGN_OR_RETURN(VmShare share, DecodeShare(*j));
  for (ShareLink& l : share.links) {
    if (l.id == link_id && l.token_sha256 == token_sha256) {
      match.link = std::move(l);
      return match;
    }
  }
  return NotFound("no such share link");
}

Status LmdbStore::RecordShareLinkUses(std::string_view vm_id, std::string_view link_id,
                                      int64_t uses, int64_t when) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->vm_shares.Get(txn, vm_id));
  if (!j) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(VmShare share, DecodeShare(*j));
  bool found = false;
  for (ShareLink& l : share.links) {
    if (l.id != link_id) continue;
    l.use_count += std::max<int64_t>(uses, 0);
    l.last_used_at = std::max(l.last_used_at, when);
    found = true;
  }
  if (!found) return Status::Ok();
  WARREN_RETURN_IF_ERROR(s_->vm_shares.Put(txn, vm_id, EncodeShare(share)));
  return txn.Commit();
}

Status LmdbStore::CreateMagicLink(const MagicLink& link, int64_t now) {
  if (link.token_sha256.size() != 64 || link.credential.user.empty()) {
    return InvalidArgument("a magic link needs its hash and user");
  }
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> user, s_->users.Get(txn, link.credential.user));
  if (!user) return NotFound("no user named " + Shown(link.credential.user));
  WARREN_RETURN_IF_ERROR(PruneSignIns(*s_, txn, now));
  WARREN_ASSIGN_OR_RETURN(size_t n, CountOfUser(txn, s_->web_magic_links, link.credential.user));
  if (n >= kMaxMagicLinksPerUser) {
    return LimitExceeded(link.credential.user + " has " + std::to_string(n) +
                         " unused sign-in links; use one, or wait " +
                         std::to_string(kMagicLinkSeconds / 60) + " minutes for them to expire");
  }
  WARREN_ASSIGN_OR_RETURN(
      bool added, s_->web_magic_links.Insert(txn, link.token_sha256, EncodeMagicLink(link)));
  if (!added) return Conflict("that sign-in link exists");
  return txn.Commit();
}

Result<BrowserSession> LmdbStore::RedeemMagicLink(
    std::string_view token_sha256, int64_t now,
    const std::function<Result<BrowserSession>(const MagicLink&)>& make) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j,
                          s_->web_magic_links.Get(txn, token_sha256));
  if (!j) return NotFound("this sign-in link is unknown or was used already");
  WARREN_ASSIGN_OR_RETURN(MagicLink link, DecodeMagicLink(*j));
  if (link.expires_at <= now) return NotFound("this sign-in link has expired");
  WARREN_ASSIGN_OR_RETURN(BrowserSession session, make(link));
  WARREN_RETURN_IF_ERROR(CheckSessionRecord(session));
  WARREN_RETURN_IF_ERROR(CheckSessionRoom(*s_, txn, session.credential.user));
  WARREN_RETURN_IF_ERROR(s_->web_magic_links.Delete(txn, token_sha256).status());
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->web_sessions.Insert(txn, session.id_sha256, EncodeSession(session)));
  if (!added) return Conflict("that session exists");
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return session;
}

Result<BrowserSession> LmdbStore::GetBrowserSession(std::string_view id_sha256, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<BrowserSession> session,
                          LiveSession(*s_, txn, id_sha256, now));
  if (!session) return NotFound("no such browser session");
  return std::move(*session);
}

Status LmdbStore::CreateHostTicket(const HostTicket& ticket, int64_t now) {
  if (ticket.token_sha256.size() != 64 || ticket.host.empty() || ticket.user.empty()) {
    return InvalidArgument("a host ticket needs its hash, host and user");
  }
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_RETURN_IF_ERROR(PruneSignIns(*s_, txn, now));
  WARREN_ASSIGN_OR_RETURN(std::optional<BrowserSession> parent,
                          LiveSession(*s_, txn, ticket.session_sha256, now));
  if (!parent || parent->credential.user != ticket.user) {
    return NotFound("no such browser session");
  }
  WARREN_ASSIGN_OR_RETURN(size_t n, CountOfUser(txn, s_->web_tickets, ticket.user));
  if (n >= kMaxHostTicketsPerUser) {
    return LimitExceeded(ticket.user + " has " + std::to_string(n) +
                         " sign-in tickets in flight; try again in a minute");
  }
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->web_tickets.Insert(txn, ticket.token_sha256, EncodeTicket(ticket)));
  if (!added) return Conflict("that ticket exists");
  return txn.Commit();
}

Result<BrowserSession> LmdbStore::RedeemHostTicket(
    std::string_view token_sha256, std::string_view host, int64_t now,
    const std::function<Result<BrowserSession>(const HostTicket&, const BrowserSession&)>& make) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->web_tickets.Get(txn, token_sha256));
  if (!j) return NotFound("this sign-in ticket is unknown or was used already");
  WARREN_ASSIGN_OR_RETURN(HostTicket ticket, DecodeTicket(*j));
  WARREN_RETURN_IF_ERROR(s_->web_tickets.Delete(txn, token_sha256).status());
  WARREN_ASSIGN_OR_RETURN(std::optional<BrowserSession> parent,
                          LiveSession(*s_, txn, ticket.session_sha256, now));
  Status refused;
  if (ticket.expires_at <= now) {
    refused = NotFound("this sign-in ticket has expired");
  } else if (ticket.host != host) {
    refused = NotFound("this sign-in ticket is for another host");
  } else if (!parent) {
    refused = NotFound("the session this ticket came from has ended");
  }
  if (!refused.ok()) {
    // Used up all the same: a ticket seen on the wrong host may have been intercepted.
    WARREN_RETURN_IF_ERROR(txn.Commit());
    return refused;
  }
  WARREN_ASSIGN_OR_RETURN(BrowserSession session, make(ticket, *parent));
  WARREN_RETURN_IF_ERROR(CheckSessionRecord(session));
  // One session per sign-in and host: a second visit through the domain replaces it.
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> older,
                          KeysWhere(txn, s_->web_sessions, [&](const nlohmann::json& o) {
                            return o.value("sign_in_id", std::string()) == session.sign_in_id &&
                                   o.value("host", std::string()) == session.host;
                          }));
  WARREN_RETURN_IF_ERROR(DeleteKeys(txn, s_->web_sessions, older));
  WARREN_RETURN_IF_ERROR(CheckSessionRoom(*s_, txn, session.credential.user));
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->web_sessions.Insert(txn, session.id_sha256, EncodeSession(session)));
  if (!added) return Conflict("that session exists");
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return session;
}

Result<size_t> LmdbStore::EndBrowserSignIn(std::string_view id_sha256) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->web_sessions.Get(txn, id_sha256));
  if (!j) return size_t{0};
  WARREN_ASSIGN_OR_RETURN(BrowserSession session, DecodeSession(*j));
  WARREN_ASSIGN_OR_RETURN(size_t n, EndSignIns(*s_, txn, {session.sign_in_id}, ""));
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return n;
}

Result<size_t> LmdbStore::EndUserBrowserSessions(std::string_view user) {
  if (user.empty()) return InvalidArgument("no user named \"\"");
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(size_t n, EndSignIns(*s_, txn, {}, user));
  WARREN_ASSIGN_OR_RETURN(std::vector<std::string> links,
                          KeysWhere(txn, s_->web_magic_links,
                                    [&](const nlohmann::json& j) { return UserOf(j) == user; }));
  WARREN_RETURN_IF_ERROR(DeleteKeys(txn, s_->web_magic_links, links));
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return n;
}

}  // namespace warren
