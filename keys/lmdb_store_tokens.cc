// LmdbStore's API token labels: tables token_labels and token_label_names (schema version 3).
// Label names share a user's namespace with key names; both indexes are checked in the same
// write transaction, so a key and a label can never end up with one name.
#include <optional>
#include <utility>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "lobby/base/user_name.h"

namespace warren {

namespace lmdb {

nlohmann::json Codec<TokenLabel>::Encode(const TokenLabel& label) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const IssuedToken& t : label.tokens) {
    tokens.push_back({{"scope", t.scope.ToJson()}, {"issued_at", t.issued_at}});
  }
  return {{"id", label.id},
          {"user", label.user},
          {"name", label.name},
          {"created_at", label.created_at},
          {"last_used_at", label.last_used_at},
          {"tokens", std::move(tokens)}};
}

Result<TokenLabel> Codec<TokenLabel>::Decode(const nlohmann::json& j) {
  try {
    TokenLabel label;
    label.id = j.at("id").get<std::string>();
    label.user = j.at("user").get<std::string>();
    label.name = j.at("name").get<std::string>();
    label.created_at = j.value("created_at", int64_t{0});
    label.last_used_at = j.value("last_used_at", int64_t{0});
    if (auto it = j.find("tokens"); it != j.end()) {
      for (const auto& t : *it) {
        IssuedToken issued;
        WARREN_ASSIGN_OR_RETURN(issued.scope, Scope::FromJson(t.at("scope")));
        issued.issued_at = t.value("issued_at", int64_t{0});
        label.tokens.push_back(std::move(issued));
      }
    }
    return label;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

}  // namespace lmdb

namespace store_internal {

Status CreateTokenTables(lmdb::Txn& txn) {
  return CreateTables(txn, {"token_labels", "token_label_names"});
}

}  // namespace store_internal

namespace {

using store_internal::NameIndexKey;
using store_internal::Shown;
using store_internal::UserPrefix;

constexpr size_t kLabelIdChars = 32;

Status ValidateLabelId(std::string_view id) {
  bool ok = id.size() == kLabelIdChars;
  for (char c : id) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (ok) return Status::Ok();
  return InvalidArgument("token label id must be 32 lowercase hex digits");
}

// The label `id` if it belongs to `user`, else NotFound.
Result<TokenLabel> OwnedLabel(LmdbStoreState& s, lmdb::Txn& txn, std::string_view user,
                              std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s.token_labels.Get(txn, id));
  if (!label || label->user != user) {
    return NotFound(Shown(user) + " has no token label " + Shown(id));
  }
  return std::move(*label);
}

// Conflict when `user` has a key or a label called `name`.
Status RequireFreeName(LmdbStoreState& s, lmdb::Txn& txn, std::string_view user,
                       std::string_view name) {
  const std::string index_key = NameIndexKey(user, name);
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> key, s.key_names.Get(txn, index_key));
  if (key) return Conflict(std::string(user) + " already has a key named " + std::string(name));
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> label,
                          s.token_label_names.Get(txn, index_key));
  if (label) {
    return Conflict(std::string(user) + " already has a token label named " + std::string(name));
  }
  return Status::Ok();
}

}  // namespace

Status LmdbStoreState::DeleteUserTokenLabels(lmdb::Txn& txn, std::string_view user) {
  std::vector<std::pair<std::string, std::string>> entries;
  WARREN_RETURN_IF_ERROR(
      token_label_names.Scan(txn, UserPrefix(user), [&](std::string_view k, std::string&& id) {
        entries.emplace_back(std::string(k), std::move(id));
        return Result<bool>(true);
      }));
  for (const auto& [index_key, id] : entries) {
    WARREN_RETURN_IF_ERROR(token_labels.Delete(txn, id).status());
    WARREN_RETURN_IF_ERROR(token_label_names.Delete(txn, index_key).status());
  }
  return Status::Ok();
}

Result<TokenLabel> LmdbStore::RecordToken(std::string_view user, std::string_view name,
                                          std::string_view new_id, const IssuedToken& token,
                                          int64_t now) {
  if (!CheckUserName(user).ok()) {
    return NotFound("no user named " + Shown(user));
  }
  WARREN_RETURN_IF_ERROR(store_internal::ValidateKeyName(name));
  if (!token.scope.tag.empty()) WARREN_RETURN_IF_ERROR(ValidateTag(token.scope.tag));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> owner, s_->users.Get(txn, user));
  if (!owner) return NotFound("no user named " + Shown(user));
  const std::string index_key = NameIndexKey(user, name);
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> existing_id,
                          s_->token_label_names.Get(txn, index_key));
  TokenLabel label;
  if (existing_id) {
    WARREN_ASSIGN_OR_RETURN(label, OwnedLabel(*s_, txn, user, *existing_id));
    if (label.tokens.size() >= kMaxTokensPerLabel) {
      return LimitExceeded("token label " + label.name + " already has " +
                           std::to_string(kMaxTokensPerLabel) +
                           " tokens; remove it and start a new label");
    }
  } else {
    WARREN_RETURN_IF_ERROR(ValidateLabelId(new_id));
    WARREN_RETURN_IF_ERROR(RequireFreeName(*s_, txn, user, name));
    label.id = std::string(new_id);
    label.user = std::string(user);
    label.name = std::string(name);
    label.created_at = now;
    WARREN_ASSIGN_OR_RETURN(bool added, s_->token_label_names.Insert(txn, index_key, label.id));
    if (!added) return Internal("token label index changed under a write transaction");
  }
  label.tokens.push_back(token);
  if (existing_id) {
    WARREN_RETURN_IF_ERROR(s_->token_labels.Put(txn, label.id, label));
  } else {
    WARREN_ASSIGN_OR_RETURN(bool added, s_->token_labels.Insert(txn, label.id, label));
    // 128 random bits do not collide; a repeat means the id was not random.
    if (!added) return Conflict("token label id " + label.id + " is already in use");
  }
  WARREN_RETURN_IF_ERROR(txn.Commit());
  return label;
}

Result<TokenLabel> LmdbStore::GetTokenLabel(std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s_->token_labels.Get(txn, id));
  if (!label) return NotFound("no token label " + Shown(id));
  return std::move(*label);
}

Result<std::vector<TokenLabel>> LmdbStore::ListTokenLabels(std::string_view user) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> u, s_->users.Get(txn, user));
  if (!u) return NotFound("no user named " + Shown(user));
  std::vector<TokenLabel> out;
  Status scanned = s_->token_label_names.Scan(
      txn, UserPrefix(user), [&](std::string_view index_key, std::string&& id) -> Result<bool> {
        WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s_->token_labels.Get(txn, id));
        if (!label) {
          return Internal("store index token_label_names/" + lmdb::PrintableKey(index_key) +
                          " points at missing label " + id);
        }
        out.push_back(std::move(*label));
        return true;
      });
  WARREN_RETURN_IF_ERROR(scanned);
  return out;
}

Status LmdbStore::RemoveTokenLabel(std::string_view user, std::string_view id) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(TokenLabel label, OwnedLabel(*s_, txn, user, id));
  WARREN_RETURN_IF_ERROR(s_->token_labels.Delete(txn, label.id).status());
  WARREN_RETURN_IF_ERROR(
      s_->token_label_names.Delete(txn, NameIndexKey(label.user, label.name)).status());
  return txn.Commit();
}

Status LmdbStore::RenameTokenLabel(std::string_view user, std::string_view id,
                                   std::string_view new_name) {
  WARREN_RETURN_IF_ERROR(store_internal::ValidateKeyName(new_name));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(TokenLabel label, OwnedLabel(*s_, txn, user, id));
  if (label.name == new_name) return Status::Ok();
  WARREN_RETURN_IF_ERROR(RequireFreeName(*s_, txn, label.user, new_name));
  WARREN_RETURN_IF_ERROR(
      s_->token_label_names.Delete(txn, NameIndexKey(label.user, label.name)).status());
  WARREN_ASSIGN_OR_RETURN(
      bool added, s_->token_label_names.Insert(txn, NameIndexKey(label.user, new_name), label.id));
  if (!added) return Internal("token label index changed under a write transaction");
  label.name = std::string(new_name);
  WARREN_RETURN_IF_ERROR(s_->token_labels.Put(txn, label.id, label));
  return txn.Commit();
}

Status LmdbStore::TouchTokenLabel(std::string_view id, int64_t when_unix) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<TokenLabel> label, s_->token_labels.Get(txn, id));
  if (!label || label->last_used_at >= when_unix) return Status::Ok();
  label->last_used_at = when_unix;
  WARREN_RETURN_IF_ERROR(s_->token_labels.Put(txn, label->id, *label));
  return txn.Commit();
}

}  // namespace warren
