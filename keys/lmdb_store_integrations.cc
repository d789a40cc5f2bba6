// LmdbStore's integrations: tables integrations and integration_names (schema version 5).
// Every write checks the whole record (keys/integration.h) and that each new "vm:ID"
// attachment names a VM of the owner, inside the write transaction, so a VM removed at the
// same moment can never leave an attachment behind: DeleteVm drops its attachments in its
// own transaction, and the two are serialised by LMDB.
#include <algorithm>
#include <optional>
#include <utility>

#include "keys/integration.h"
#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"

namespace warren {

namespace lmdb {

nlohmann::json Codec<IntegrationRecord>::Encode(const IntegrationRecord& i) {
  return {{"id", i.id},
          {"owner", i.owner},
          {"name", i.name},
          {"kind", i.kind},
          {"target", i.target},
          {"header_names", i.header_names},
          {"bearer", i.bearer},
          {"sealed", i.sealed},
          {"fingerprint", i.fingerprint},
          {"attachments", i.attachments},
          {"created_at", i.created_at}};
}

Result<IntegrationRecord> Codec<IntegrationRecord>::Decode(const nlohmann::json& j) {
  try {
    IntegrationRecord i;
    i.id = j.at("id").get<std::string>();
    i.owner = j.at("owner").get<std::string>();
    i.name = j.at("name").get<std::string>();
    i.kind = j.at("kind").get<std::string>();
    i.target = j.at("target").get<std::string>();
    i.header_names = j.value("header_names", std::vector<std::string>{});
    i.bearer = j.value("bearer", false);
    i.sealed = j.value("sealed", "");
    i.fingerprint = j.value("fingerprint", "");
    i.attachments = j.value("attachments", std::vector<std::string>{});
    i.created_at = j.value("created_at", int64_t{0});
    return i;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

}  // namespace lmdb

namespace store_internal {

Status CreateIntegrationTables(lmdb::Txn& txn) {
  return CreateTables(txn, {"integrations", "integration_names"});
}

Status OpenIntegrationTables(LmdbStoreState& s, lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(s.integrations,
                          lmdb::Table<IntegrationRecord>::Open(txn, "integrations", false));
  WARREN_ASSIGN_OR_RETURN(s.integration_names,
                          lmdb::Table<std::string>::Open(txn, "integration_names", false));
  return Status::Ok();
}

}  // namespace store_internal

namespace {

using store_internal::NameIndexKey;
using store_internal::Shown;
using store_internal::UserPrefix;

// Index keys join owner and name with NUL; integration names never hold one (the name
// rule), and an owner that does cannot be a user, so it has no entries to find.
bool UsableOwner(std::string_view owner) {
  return !owner.empty() && owner.find('\0') == std::string_view::npos;
}

Status NoIntegration(std::string_view owner, std::string_view name) {
  return NotFound(Shown(owner) + " has no integration named " + Shown(name));
}

// The integration `name` of `owner`, else NotFound.
Result<IntegrationRecord> OwnedIntegration(LmdbStoreState& s, lmdb::Txn& txn,
                                           std::string_view owner, std::string_view name) {
  // Names that break the rule cannot be in the index (and would not make a clean key).
  if (!UsableOwner(owner) || !CheckIntegrationName(name).ok()) {
    return NoIntegration(owner, name);
  }
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> id,
                          s.integration_names.Get(txn, NameIndexKey(owner, name)));
  if (!id) return NoIntegration(owner, name);
  WARREN_ASSIGN_OR_RETURN(std::optional<IntegrationRecord> rec, s.integrations.Get(txn, *id));
  if (!rec) {
    return Internal("store index integration_names/" +
                    lmdb::PrintableKey(NameIndexKey(owner, name)) +
                    " points at missing integration " + *id);
  }
  return std::move(*rec);
}

// Each "vm:ID" attachment of `integration` not already in `before` must name a VM of its
// owner.
Status CheckAttachedVms(LmdbStoreState& s, lmdb::Txn& txn, const IntegrationRecord& integration,
                        const std::vector<std::string>& before) {
  for (const std::string& a : integration.attachments) {
    if (!a.starts_with(kAttachVmPrefix)) continue;
    if (std::binary_search(before.begin(), before.end(), a)) continue;
    const std::string id = a.substr(kAttachVmPrefix.size());
    WARREN_ASSIGN_OR_RETURN(std::optional<VmRecord> vm, s.vms.Get(txn, id));
    if (!vm || vm->owner != integration.owner) {
      return NotFound(integration.owner + " has no VM with id " + id + " to attach");
    }
  }
  return Status::Ok();
}

// The owner's integrations (index key, record), in name order.
Result<std::vector<std::pair<std::string, IntegrationRecord>>> OwnerIntegrations(
    LmdbStoreState& s, lmdb::Txn& txn, std::string_view owner) {
  std::vector<std::pair<std::string, IntegrationRecord>> out;
  if (!UsableOwner(owner)) return out;
  std::vector<std::pair<std::string, std::string>> entries;
  WARREN_RETURN_IF_ERROR(s.integration_names.Scan(
      txn, UserPrefix(owner), [&](std::string_view k, std::string&& id) -> Result<bool> {
        entries.emplace_back(std::string(k), std::move(id));
        return true;
      }));
  for (auto& [index_key, id] : entries) {
    WARREN_ASSIGN_OR_RETURN(std::optional<IntegrationRecord> rec, s.integrations.Get(txn, id));
    if (!rec) {
      return Internal("store index integration_names/" + lmdb::PrintableKey(index_key) +
                      " points at missing integration " + id);
    }
    out.emplace_back(std::move(index_key), std::move(*rec));
  }
  return out;
}

}  // namespace

Status LmdbStoreState::DeleteUserIntegrations(lmdb::Txn& txn, std::string_view user) {
  WARREN_ASSIGN_OR_RETURN(auto all, OwnerIntegrations(*this, txn, user));
  for (const auto& [index_key, rec] : all) {
    WARREN_RETURN_IF_ERROR(integrations.Delete(txn, rec.id).status());
    WARREN_RETURN_IF_ERROR(integration_names.Delete(txn, index_key).status());
  }
  return Status::Ok();
}

Status LmdbStoreState::DropVmAttachments(lmdb::Txn& txn, const VmRecord& vm) {
  WARREN_ASSIGN_OR_RETURN(auto all, OwnerIntegrations(*this, txn, vm.owner));
  const std::string attachment = VmAttachment(vm.id);
  for (auto& [index_key, rec] : all) {
    if (std::erase(rec.attachments, attachment) == 0) continue;
    WARREN_RETURN_IF_ERROR(integrations.Put(txn, rec.id, rec));
  }
  return Status::Ok();
}

Status LmdbStore::CreateIntegration(const IntegrationRecord& integration) {
  WARREN_RETURN_IF_ERROR(ValidateIntegrationRecord(integration));
  if (!UsableOwner(integration.owner)) return NotFound("no user named " + Shown(integration.owner));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> owner, s_->users.Get(txn, integration.owner));
  if (!owner) return NotFound("no user named " + Shown(integration.owner));
  WARREN_RETURN_IF_ERROR(CheckAttachedVms(*s_, txn, integration, {}));
  WARREN_ASSIGN_OR_RETURN(bool added, s_->integrations.Insert(txn, integration.id, integration));
  if (!added) return Conflict("integration id " + integration.id + " is taken");
  WARREN_ASSIGN_OR_RETURN(
      added, s_->integration_names.Insert(txn, NameIndexKey(integration.owner, integration.name),
                                          integration.id));
  if (!added) {
    return Conflict(integration.owner + " already has an integration named " + integration.name);
  }
  return txn.Commit();
}

Result<IntegrationRecord> LmdbStore::GetIntegration(std::string_view owner, std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  return OwnedIntegration(*s_, txn, owner, name);
}

Result<std::vector<IntegrationRecord>> LmdbStore::ListIntegrations(std::string_view owner) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(auto all, OwnerIntegrations(*s_, txn, owner));
  std::vector<IntegrationRecord> out;
  out.reserve(all.size());
  for (auto& [index_key, rec] : all) out.push_back(std::move(rec));
  return out;
}

Status LmdbStore::UpdateIntegration(std::string_view owner, std::string_view name,
                                    const std::function<Status(IntegrationRecord&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(IntegrationRecord before, OwnedIntegration(*s_, txn, owner, name));
  IntegrationRecord after = before;
  WARREN_RETURN_IF_ERROR(change(after));
  if (after.id != before.id || after.owner != before.owner || after.name != before.name) {
    return InvalidArgument("UpdateIntegration may not change an integration's id, owner or name");
  }
  WARREN_RETURN_IF_ERROR(ValidateIntegrationRecord(after));
  WARREN_RETURN_IF_ERROR(CheckAttachedVms(*s_, txn, after, before.attachments));
  WARREN_RETURN_IF_ERROR(s_->integrations.Put(txn, after.id, after));
  return txn.Commit();
}

Status LmdbStore::RenameIntegration(std::string_view owner, std::string_view name,
                                    std::string_view new_name) {
  WARREN_RETURN_IF_ERROR(CheckIntegrationName(new_name));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(IntegrationRecord rec, OwnedIntegration(*s_, txn, owner, name));
  if (rec.name == new_name) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(
      bool added, s_->integration_names.Insert(txn, NameIndexKey(rec.owner, new_name), rec.id));
  if (!added) {
    return Conflict(rec.owner + " already has an integration named " + std::string(new_name));
  }
  WARREN_RETURN_IF_ERROR(
      s_->integration_names.Delete(txn, NameIndexKey(rec.owner, rec.name)).status());
  rec.name = std::string(new_name);
  WARREN_RETURN_IF_ERROR(s_->integrations.Put(txn, rec.id, rec));
  return txn.Commit();
}

Status LmdbStore::DeleteIntegration(std::string_view owner, std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(IntegrationRecord rec, OwnedIntegration(*s_, txn, owner, name));
  WARREN_RETURN_IF_ERROR(s_->integrations.Delete(txn, rec.id).status());
  WARREN_RETURN_IF_ERROR(
      s_->integration_names.Delete(txn, NameIndexKey(rec.owner, rec.name)).status());
  return txn.Commit();
}

}  // namespace warren
