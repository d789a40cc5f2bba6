// LmdbStore's OAuth records (schema version 4): oauth_clients, oauth_requests with their two
// indexes (user code hash -> request id, authorization code hash -> request id) and
// oauth_refresh. Keys are hashes (keys/oauth.h HashSecret), never secrets.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"

namespace warren {
namespace {

using store_internal::NameIndexKey;

nlohmann::json EncodeClient(const OAuthClient& c) {
  return {{"id", c.id},
          {"name", c.name},
          {"redirect_uris", c.redirect_uris},
          {"created_at", c.created_at},
          {"source", c.source},
          {"last_used_at", c.last_used_at}};
}

Result<OAuthClient> DecodeClient(const nlohmann::json& j) {
  try {
    OAuthClient c;
    c.id = j.at("id").get<std::string>();
    c.name = j.at("name").get<std::string>();
    c.redirect_uris = j.at("redirect_uris").get<std::vector<std::string>>();
    c.created_at = j.value("created_at", int64_t{0});
    c.source = j.value("source", std::string());
    c.last_used_at = j.value("last_used_at", int64_t{0});
    return c;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("oauth client record: ") + e.what());
  }
}

nlohmann::json EncodeRequest(const OAuthRequest& r) {
  return {{"id", r.id},
          {"user_code_hash", r.user_code_hash},
          {"client_id", r.client_id},
          {"redirect_uri", r.redirect_uri},
          {"code_challenge", r.code_challenge},
          {"resource", r.resource},
          {"state", r.state},
          {"source", r.source},
          {"created_at", r.created_at},
          {"expires_at", r.expires_at},
          {"phase", OAuthPhaseName(r.phase)},
          {"user", r.user},
          {"scope", r.scope.ToJson()},
          {"approved_at", r.approved_at},
          {"code_hash", r.code_hash},
          {"code_expires_at", r.code_expires_at},
          {"label_id", r.label_id}};
}

Result<OAuthRequest> DecodeRequest(const nlohmann::json& j) {
  try {
    OAuthRequest r;
    r.id = j.at("id").get<std::string>();
    r.user_code_hash = j.at("user_code_hash").get<std::string>();
    r.client_id = j.at("client_id").get<std::string>();
    r.redirect_uri = j.at("redirect_uri").get<std::string>();
    r.code_challenge = j.at("code_challenge").get<std::string>();
    r.resource = j.value("resource", std::string());
    r.state = j.value("state", std::string());
    r.source = j.value("source", std::string());
    r.created_at = j.value("created_at", int64_t{0});
    r.expires_at = j.value("expires_at", int64_t{0});
    std::string phase = j.value("phase", std::string("pending"));
    r.phase = phase == "approved"      ? OAuthPhase::kApproved
              : phase == "code_issued" ? OAuthPhase::kCodeIssued
              : phase == "redeemed"    ? OAuthPhase::kRedeemed
              : phase == "denied"      ? OAuthPhase::kDenied
                                       : OAuthPhase::kPending;
    r.user = j.value("user", std::string());
    if (auto it = j.find("scope"); it != j.end()) {
      WARREN_ASSIGN_OR_RETURN(r.scope, Scope::FromJson(*it));
    }
    r.approved_at = j.value("approved_at", int64_t{0});
    r.code_hash = j.value("code_hash", std::string());
    r.code_expires_at = j.value("code_expires_at", int64_t{0});
    r.label_id = j.value("label_id", std::string());
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("oauth request record: ") + e.what());
  }
}

nlohmann::json EncodeRefresh(const OAuthRefresh& r) {
  return {{"hash", r.hash},           {"label_id", r.label_id}, {"user", r.user},
          {"client_id", r.client_id}, {"resource", r.resource}, {"scope", r.scope.ToJson()},
          {"issued_at", r.issued_at}, {"used", r.used}};
}

Result<OAuthRefresh> DecodeRefresh(const nlohmann::json& j) {
  try {
    OAuthRefresh r;
    r.hash = j.at("hash").get<std::string>();
    r.label_id = j.at("label_id").get<std::string>();
    r.user = j.at("user").get<std::string>();
    r.client_id = j.at("client_id").get<std::string>();
    r.resource = j.value("resource", std::string());
    WARREN_ASSIGN_OR_RETURN(r.scope, Scope::FromJson(j.at("scope")));
    r.issued_at = j.value("issued_at", int64_t{0});
    r.used = j.value("used", false);
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("oauth refresh record: ") + e.what());
  }
}

Result<std::optional<OAuthRequest>> LoadRequest(LmdbStoreState& s, lmdb::Txn& txn,
                                                std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s.oauth_requests.Get(txn, id));
  if (!j) return std::optional<OAuthRequest>();
  WARREN_ASSIGN_OR_RETURN(OAuthRequest r, DecodeRequest(*j));
  return std::optional<OAuthRequest>(std::move(r));
}

Status DeleteRequest(LmdbStoreState& s, lmdb::Txn& txn, const OAuthRequest& r) {
  WARREN_RETURN_IF_ERROR(s.oauth_requests.Delete(txn, r.id).status());
  WARREN_RETURN_IF_ERROR(s.oauth_user_codes.Delete(txn, r.user_code_hash).status());
  if (!r.code_hash.empty()) {
    WARREN_RETURN_IF_ERROR(s.oauth_codes.Delete(txn, r.code_hash).status());
  }
  return Status::Ok();
}

// Deletes a token label and its name index entry (every access token minted under it stops
// working); false when there was none.
Result<bool> DeleteLabel(LmdbStoreState& s, lmdb::Txn& txn, std::string_view label_id) {
  WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s.token_labels.Get(txn, label_id));
  if (!label) return false;
  WARREN_RETURN_IF_ERROR(s.token_labels.Delete(txn, label->id).status());
  WARREN_RETURN_IF_ERROR(
      s.token_label_names.Delete(txn, NameIndexKey(label->user, label->name)).status());
  return true;
}

// Removes the clients `ids` with their requests, refresh tokens and token labels.
Result<OAuthClientRemoval> RemoveClients(LmdbStoreState& s, lmdb::Txn& txn,
                                         const std::set<std::string>& ids) {
  OAuthClientRemoval removed;
  if (ids.empty()) return removed;
  std::vector<OAuthRequest> requests;
  WARREN_RETURN_IF_ERROR(
      s.oauth_requests.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
        if (ids.count(j.value("client_id", std::string()))) {
          WARREN_ASSIGN_OR_RETURN(OAuthRequest r, DecodeRequest(j));
          requests.push_back(std::move(r));
        }
        return true;
      }));
  std::vector<std::string> refresh;
  std::set<std::string> labels;
  WARREN_RETURN_IF_ERROR(
      s.oauth_refresh.Scan(txn, "", [&](std::string_view key, nlohmann::json&& j) -> Result<bool> {
        if (ids.count(j.value("client_id", std::string()))) {
          refresh.emplace_back(key);
          labels.insert(j.value("label_id", std::string()));
        }
        return true;
      }));
  for (const OAuthRequest& r : requests) WARREN_RETURN_IF_ERROR(DeleteRequest(s, txn, r));
  for (const std::string& k : refresh) {
    WARREN_RETURN_IF_ERROR(s.oauth_refresh.Delete(txn, k).status());
  }
  for (const std::string& label : labels) {
    WARREN_ASSIGN_OR_RETURN(bool gone, DeleteLabel(s, txn, label));
    removed.token_labels += gone ? 1 : 0;
  }
  for (const std::string& id : ids) {
    WARREN_RETURN_IF_ERROR(s.oauth_clients.Delete(txn, id).status());
  }
  removed.requests = requests.size();
  removed.refresh_tokens = refresh.size();
  return removed;
}

Result<OAuthRequest> RequestByIndex(LmdbStoreState& s, const lmdb::JsonTable& index,
                                    std::string_view hash) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s.env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> id, index.Get(txn, hash));
  if (!id || !id->is_string()) return NotFound("no such sign-in request");
  WARREN_ASSIGN_OR_RETURN(std::optional<OAuthRequest> r,
                          LoadRequest(s, txn, id->get<std::string>()));
  if (!r) return NotFound("no such sign-in request");
  return std::move(*r);
}

}  // namespace

namespace store_internal {

Status CreateOAuthTables(lmdb::Txn& txn) {
  return CreateTables(
      txn, {"oauth_clients", "oauth_requests", "oauth_user_codes", "oauth_codes", "oauth_refresh"});
}

Status OpenOAuthTables(LmdbStoreState& s, lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(s.oauth_clients, lmdb::JsonTable::Open(txn, "oauth_clients", false));
  WARREN_ASSIGN_OR_RETURN(s.oauth_requests, lmdb::JsonTable::Open(txn, "oauth_requests", false));
  WARREN_ASSIGN_OR_RETURN(s.oauth_user_codes,
                          lmdb::JsonTable::Open(txn, "oauth_user_codes", false));
  WARREN_ASSIGN_OR_RETURN(s.oauth_codes, lmdb::JsonTable::Open(txn, "oauth_codes", false));
  WARREN_ASSIGN_OR_RETURN(s.oauth_refresh, lmdb::JsonTable::Open(txn, "oauth_refresh", false));
  return Status::Ok();
}

}  // namespace store_internal

Status LmdbStore::CreateOAuthClient(const OAuthClient& client) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  const int64_t now = client.created_at;
  std::vector<OAuthClient> clients;
  std::vector<size_t> unmarked;  // stored before uses were recorded
  WARREN_RETURN_IF_ERROR(
      s_->oauth_clients.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
        if (!j.contains("last_used_at")) unmarked.push_back(clients.size());
        WARREN_ASSIGN_OR_RETURN(OAuthClient c, DecodeClient(j));
        clients.push_back(std::move(c));
        return true;
      }));
  if (!unmarked.empty()) {
    // Those with a sign-in (a refresh token) count as used now; the rest as never used.
    std::set<std::string> signed_in;
    WARREN_RETURN_IF_ERROR(
        s_->oauth_refresh.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
          signed_in.insert(j.value("client_id", std::string()));
          return true;
        }));
    for (size_t i : unmarked) {
      OAuthClient& c = clients[i];
      c.last_used_at = signed_in.count(c.id) ? now : 0;
      WARREN_RETURN_IF_ERROR(s_->oauth_clients.Put(txn, c.id, EncodeClient(c)));
    }
  }
  std::set<std::string> expired;
  size_t live = 0;
  // The oldest client never used: what makes room when the table is full.
  const OAuthClient* oldest_unused = nullptr;
  for (const OAuthClient& c : clients) {
    if (OAuthClientExpired(c, now)) {
      expired.insert(c.id);
      continue;
    }
    ++live;
    if (c.last_used_at == 0 && (!oldest_unused || c.created_at < oldest_unused->created_at)) {
      oldest_unused = &c;
    }
  }
  if (live >= kMaxOAuthClients) {
    if (oldest_unused == nullptr) {
      return LimitExceeded("this server has " + std::to_string(kMaxOAuthClients) +
                           " OAuth clients in use; an admin can remove some (oauth clients "
                           "list, oauth clients remove)");
    }
    expired.insert(oldest_unused->id);
  }
  WARREN_RETURN_IF_ERROR(RemoveClients(*s_, txn, expired).status());
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->oauth_clients.Insert(txn, client.id, EncodeClient(client)));
  if (!added) return Conflict("client id in use");
  return txn.Commit();
}

Result<OAuthClient> LmdbStore::GetOAuthClient(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->oauth_clients.Get(txn, id));
  if (!j) return NotFound("unknown client_id");
  return DecodeClient(*j);
}

Result<std::vector<OAuthClient>> LmdbStore::ListOAuthClients() {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<OAuthClient> out;
  WARREN_RETURN_IF_ERROR(
      s_->oauth_clients.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
        WARREN_ASSIGN_OR_RETURN(OAuthClient c, DecodeClient(j));
        out.push_back(std::move(c));
        return true;
      }));
  return out;
}

Status LmdbStore::MarkOAuthClientUsed(std::string_view id, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->oauth_clients.Get(txn, id));
  if (!j) return NotFound("unknown client_id");
  WARREN_ASSIGN_OR_RETURN(OAuthClient c, DecodeClient(*j));
  if (c.last_used_at != 0 && now - c.last_used_at < kOAuthClientUseGranularity) {
    return Status::Ok();
  }
  c.last_used_at = now;
  WARREN_RETURN_IF_ERROR(s_->oauth_clients.Put(txn, c.id, EncodeClient(c)));
  return txn.Commit();
}

Result<OAuthClientRemoval> LmdbStore::RemoveOAuthClient(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->oauth_clients.Get(txn, id));
  if (!j) return NotFound("no OAuth client " + std::string(id.substr(0, 64)));
  WARREN_ASSIGN_OR_RETURN(OAuthClientRemoval removed, RemoveClients(*s_, txn, {std::string(id)}));
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return removed;
}

Status LmdbStore::CreateOAuthRequest(const OAuthRequest& request, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  // Drop what has expired: unapproved requests past their expiry, and finished ones past
  // their code's. Redeemed requests stay until the code would have expired (a second
  // redemption must still be recognised as one).
  std::vector<OAuthRequest> expired;
  size_t live = 0;
  // Pending (not yet approved) requests by source, oldest first.
  std::map<std::string, std::vector<OAuthRequest>> pending;
  WARREN_RETURN_IF_ERROR(
      s_->oauth_requests.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
        WARREN_ASSIGN_OR_RETURN(OAuthRequest r, DecodeRequest(j));
        int64_t until = std::max(r.expires_at, r.code_expires_at);
        if (until <= now) {
          expired.push_back(std::move(r));
          return true;
        }
        ++live;
        if (r.phase == OAuthPhase::kPending) pending[r.source].push_back(std::move(r));
        return true;
      }));
  for (const OAuthRequest& r : expired) WARREN_RETURN_IF_ERROR(DeleteRequest(*s_, txn, r));
  if (auto mine = pending.find(request.source);
      mine != pending.end() && mine->second.size() >= kMaxPendingOAuthRequestsPerSource) {
    return LimitExceeded("too many sign-ins are pending from your address (" +
                         std::to_string(kMaxPendingOAuthRequestsPerSource) +
                         "); finish or wait out one of them");
  }
  if (live >= s_->max_pending_oauth_requests) {
    // Full: the source holding the most pending sign-ins gives up its oldest one.
    auto biggest = std::max_element(
        pending.begin(), pending.end(),
        [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (biggest == pending.end()) {
      return LimitExceeded("too many sign-ins are in progress; try again in a minute");
    }
    auto oldest = std::min_element(
        biggest->second.begin(), biggest->second.end(),
        [](const OAuthRequest& a, const OAuthRequest& b) { return a.created_at < b.created_at; });
    WARREN_RETURN_IF_ERROR(DeleteRequest(*s_, txn, *oldest));
  }
  WARREN_ASSIGN_OR_RETURN(bool code_added,
                          s_->oauth_user_codes.Insert(txn, request.user_code_hash, request.id));
  if (!code_added) return Conflict("user code in use");
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->oauth_requests.Insert(txn, request.id, EncodeRequest(request)));
  if (!added) return Conflict("request id in use");
  return txn.Commit();
}

Result<OAuthRequest> LmdbStore::GetOAuthRequest(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<OAuthRequest> r, LoadRequest(*s_, txn, id));
  if (!r) return NotFound("no such sign-in request");
  return std::move(*r);
}

Result<OAuthRequest> LmdbStore::FindOAuthRequestByUserCode(std::string_view user_code_hash) {
  return RequestByIndex(*s_, s_->oauth_user_codes, user_code_hash);
}

Result<OAuthRequest> LmdbStore::FindOAuthRequestByCode(std::string_view code_hash) {
  return RequestByIndex(*s_, s_->oauth_codes, code_hash);
}

Status LmdbStore::UpdateOAuthRequest(std::string_view id,
                                     const std::function<Status(OAuthRequest&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<OAuthRequest> loaded, LoadRequest(*s_, txn, id));
  if (!loaded) return NotFound("no such sign-in request");
  OAuthRequest r = *loaded;
  WARREN_RETURN_IF_ERROR(change(r));
  if (r.id != loaded->id || r.user_code_hash != loaded->user_code_hash) {
    return InvalidArgument("a sign-in request's id and user code cannot change");
  }
  if (r.code_hash != loaded->code_hash) {
    if (!loaded->code_hash.empty()) {
      WARREN_RETURN_IF_ERROR(s_->oauth_codes.Delete(txn, loaded->code_hash).status());
    }
    if (!r.code_hash.empty()) {
      WARREN_ASSIGN_OR_RETURN(bool added, s_->oauth_codes.Insert(txn, r.code_hash, r.id));
      if (!added) return Conflict("authorization code in use");
    }
  }
  WARREN_RETURN_IF_ERROR(s_->oauth_requests.Put(txn, r.id, EncodeRequest(r)));
  return txn.Commit();
}

Status LmdbStore::PutOAuthRefresh(const OAuthRefresh& refresh) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->oauth_refresh.Insert(txn, refresh.hash, EncodeRefresh(refresh)));
  if (!added) return Conflict("refresh token in use");
  return txn.Commit();
}

Result<OAuthRefresh> LmdbStore::RotateOAuthRefresh(std::string_view old_hash,
                                                   std::string_view client_id,
                                                   std::string_view new_hash, int64_t now) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> j, s_->oauth_refresh.Get(txn, old_hash));
  if (!j) return NotFound("unknown refresh token");
  WARREN_ASSIGN_OR_RETURN(OAuthRefresh old, DecodeRefresh(*j));
  if (old.client_id != client_id) {
    return InvalidArgument("this refresh token was issued to another client");
  }
  WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s_->token_labels.Get(txn, old.label_id));
  if (old.used) {
    // A replay: someone holds a rotated token. Revoke the whole sign-in.
    if (label) WARREN_RETURN_IF_ERROR(DeleteLabel(*s_, txn, label->id).status());
    std::vector<std::string> family;
    WARREN_RETURN_IF_ERROR(s_->oauth_refresh.Scan(
        txn, "", [&](std::string_view key, nlohmann::json&& v) -> Result<bool> {
          if (v.is_object() && v.value("label_id", std::string()) == old.label_id) {
            family.emplace_back(key);
          }
          return true;
        }));
    for (const std::string& k : family) {
      WARREN_RETURN_IF_ERROR(s_->oauth_refresh.Delete(txn, k).status());
    }
    WARREN_RETURN_IF_ERROR(txn.Commit());
    return PermissionDenied(
        "this refresh token was already used; the sign-in it belongs to has been revoked");
  }
  if (!label || label->user != old.user) {
    return NotFound("the sign-in of this refresh token was revoked");
  }
  if (old.scope.Expired(now)) return NotFound("the sign-in of this refresh token expired");
  old.used = true;
  WARREN_RETURN_IF_ERROR(s_->oauth_refresh.Put(txn, old.hash, EncodeRefresh(old)));
  OAuthRefresh next = old;
  next.hash = std::string(new_hash);
  next.used = false;
  next.issued_at = now;
  WARREN_ASSIGN_OR_RETURN(bool added,
                          s_->oauth_refresh.Insert(txn, next.hash, EncodeRefresh(next)));
  if (!added) return Conflict("refresh token in use");
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return next;
}

}  // namespace warren
