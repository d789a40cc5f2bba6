// LmdbStore's VM hosts: table hosts (schema version 9), host name -> HostRecord JSON.
#include <string>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/lmdb_store_state.h"
#include "lobby/base/host_name.h"

namespace warren {

namespace {

nlohmann::json EncodeHost(const HostRecord& h) {
  return {{"name", h.name},
          {"drained", h.drained},
          {"drained_at", h.drained_at},
          {"drained_by", h.drained_by}};
}

Result<HostRecord> DecodeHost(const nlohmann::json& j) {
  try {
    HostRecord h;
    h.name = j.at("name").get<std::string>();
    h.drained = j.value("drained", false);
    h.drained_at = j.value("drained_at", int64_t{0});
    h.drained_by = j.value("drained_by", "");
    return h;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("a stored host record is malformed: ") + e.what());
  }
}

}  // namespace

namespace store_internal {

Status CreateHostTables(lmdb::Txn& txn) { return CreateTables(txn, {"hosts"}); }

Status OpenHostTables(LmdbStoreState& s, lmdb::Txn& txn) {
  WARREN_ASSIGN_OR_RETURN(s.hosts, lmdb::JsonTable::Open(txn, "hosts", false));
  return Status::Ok();
}

}  // namespace store_internal

Result<std::vector<HostRecord>> LmdbStore::ListHosts() {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<HostRecord> out;
  WARREN_RETURN_IF_ERROR(
      s_->hosts.Scan(txn, "", [&](std::string_view, nlohmann::json&& j) -> Result<bool> {
        WARREN_ASSIGN_OR_RETURN(HostRecord h, DecodeHost(j));
        out.push_back(std::move(h));
        return true;
      }));
  return out;
}

Status LmdbStore::PutHost(const HostRecord& host) {
  WARREN_RETURN_IF_ERROR(CheckHostName(host.name));
  if (host.drained_at < 0 || host.drained_by.size() > 64) {
    return InvalidArgument("host " + host.name + ": a drain time is never negative");
  }
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_RETURN_IF_ERROR(s_->hosts.Put(txn, host.name, EncodeHost(host)));
  return txn.Commit();
}

}  // namespace warren
