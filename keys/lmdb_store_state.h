// Internal to keys/: LmdbStore's environment and table handles, shared by the .cc files
// that implement it (lmdb_store.cc for users and keys, lmdb_store_vms.cc for VMs and jobs,
// lmdb_store_tokens.cc, lmdb_store_oauth.cc, lmdb_store_integrations.cc, lmdb_store_web.cc).
// Table handles are immutable after Open, so State may be used from any thread.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keys/lmdb_table.h"
#include "keys/oauth.h"
#include "keys/store.h"

namespace warren {

namespace lmdb {

// Index values: a plain JSON string.
template <>
struct Codec<std::string> {
  static nlohmann::json Encode(const std::string& s) { return s; }
  static Result<std::string> Decode(const nlohmann::json& j) {
    if (!j.is_string()) return Internal("expected a JSON string");
    return j.get<std::string>();
  }
};

// The record codecs, defined in lmdb_store.cc (users, keys) and lmdb_store_vms.cc (VMs,
// jobs); declared here so every use sees the specialisation.
template <>
struct Codec<User> {
  static nlohmann::json Encode(const User& u);
  static Result<User> Decode(const nlohmann::json& j);
};

template <>
struct Codec<SshKey> {
  static nlohmann::json Encode(const SshKey& k);
  static Result<SshKey> Decode(const nlohmann::json& j);
};

template <>
struct Codec<VmRecord> {
  static nlohmann::json Encode(const VmRecord& vm);
  static Result<VmRecord> Decode(const nlohmann::json& j);
};

template <>
struct Codec<JobRecord> {
  static nlohmann::json Encode(const JobRecord& job);
  static Result<JobRecord> Decode(const nlohmann::json& j);
};

template <>
struct Codec<UsageRow> {
  static nlohmann::json Encode(const UsageRow& row);
  static Result<UsageRow> Decode(const nlohmann::json& j);
};

template <>
struct Codec<TokenLabel> {
  static nlohmann::json Encode(const TokenLabel& label);
  static Result<TokenLabel> Decode(const nlohmann::json& j);
};

template <>
struct Codec<IntegrationRecord> {
  static nlohmann::json Encode(const IntegrationRecord& integration);
  static Result<IntegrationRecord> Decode(const nlohmann::json& j);
};

}  // namespace lmdb

namespace store_internal {

// An identifier from the caller, cut short for a message: lookups take untrusted text of
// any length.
std::string Shown(std::string_view id);

// Creates the named tables (for an upgrade step); existing ones are left as they are.
Status CreateTables(lmdb::Txn& txn, std::initializer_list<const char*> names);

// Creates the VM and job tables (schema version 2).
Status CreateVmTables(lmdb::Txn& txn);

// Creates the token label tables (schema version 3).
Status CreateTokenTables(lmdb::Txn& txn);

// Creates the OAuth tables (schema version 4).
Status CreateOAuthTables(lmdb::Txn& txn);

// Creates the integration tables (schema version 5).
Status CreateIntegrationTables(lmdb::Txn& txn);
// VM records' egress "full" becomes "all", its name since issue 12 (schema version 6).
Status RenameFullEgress(lmdb::Txn& txn);
// Creates the web tables: shares, share links, browser sign-ins (schema version 7).
Status CreateWebTables(lmdb::Txn& txn);
// Creates the usage table (schema version 8).
Status CreateUsageTables(lmdb::Txn& txn);
// Creates the hosts table (schema version 9).
Status CreateHostTables(lmdb::Txn& txn);

// InvalidArgument unless `at_ms` is a Unix ms time after 1970 and before the year 10000:
// accrual walks the days between marks, so a wild time must not reach it.
Status CheckUsageTime(int64_t at_ms);

// The index key of a per-user name (key names, label names): user NUL name.
std::string NameIndexKey(std::string_view user, std::string_view name);
// The prefix of every index key of `user`: user NUL.
std::string UserPrefix(std::string_view user);

// The naming rules the store enforces itself (commands check them earlier, with friendlier
// messages): index keys join user and name with NUL and the rules keep both free of it.
Status ValidateKeyName(std::string_view name);  // ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$

}  // namespace store_internal

struct LmdbStoreState;
namespace store_internal {
// Opens the OAuth tables' handles into `s` (lmdb_store_oauth.cc).
Status OpenOAuthTables(LmdbStoreState& s, lmdb::Txn& txn);
// Opens the integration tables' handles into `s` (lmdb_store_integrations.cc).
Status OpenIntegrationTables(LmdbStoreState& s, lmdb::Txn& txn);
// Opens the web tables' handles into `s` (lmdb_store_web.cc).
Status OpenWebTables(LmdbStoreState& s, lmdb::Txn& txn);
// Opens the usage table's handle into `s` (lmdb_store_usage.cc).
Status OpenUsageTables(LmdbStoreState& s, lmdb::Txn& txn);
// Opens the hosts table's handle into `s` (lmdb_store_hosts.cc).
Status OpenHostTables(LmdbStoreState& s, lmdb::Txn& txn);
}  // namespace store_internal

struct LmdbStoreState {
  std::string dir;
  std::string canonical_dir;  // the entry in the set of open directories
  lmdb::EnvPtr env;
  lmdb::JsonTable meta;
  lmdb::Table<User> users;
  lmdb::Table<SshKey> keys;
  lmdb::Table<std::string> key_names;          // user NUL key name -> fingerprint
  lmdb::Table<VmRecord> vms;                   // id -> VmRecord
  lmdb::Table<std::string> vm_names;           // name -> id
  lmdb::Table<JobRecord> jobs;                 // vm_id NUL job -> JobRecord
  lmdb::Table<TokenLabel> token_labels;        // id -> TokenLabel
  lmdb::Table<std::string> token_label_names;  // user NUL label name -> id
  // OAuth (keys/oauth.h), JSON values encoded in lmdb_store_oauth.cc.
  lmdb::JsonTable oauth_clients;                // client id -> OAuthClient
  lmdb::JsonTable oauth_requests;               // request id -> OAuthRequest
  lmdb::JsonTable oauth_user_codes;             // user code hash -> request id
  lmdb::JsonTable oauth_codes;                  // authorization code hash -> request id
  lmdb::JsonTable oauth_refresh;                // refresh token hash -> OAuthRefresh
  lmdb::Table<IntegrationRecord> integrations;  // id -> IntegrationRecord
  lmdb::Table<std::string> integration_names;   // owner NUL integration name -> id
  // The web (keys/web_share.h), JSON values encoded in lmdb_store_web.cc.
  lmdb::JsonTable vm_shares;        // vm id -> VmShare
  lmdb::JsonTable share_links;      // link token hash -> vm id NUL link id
  lmdb::JsonTable web_magic_links;  // token hash -> MagicLink
  lmdb::JsonTable web_sessions;     // session id hash -> BrowserSession
  lmdb::JsonTable web_tickets;      // ticket hash -> HostTicket
  // Usage (keys/usage.h), encoded in lmdb_store_usage.cc.
  lmdb::Table<UsageRow> usage;  // owner NUL day (12 digits) NUL vm id -> UsageRow
  size_t max_usage_rows_per_user_day = kMaxUsageRowsPerUserDay;
  lmdb::JsonTable hosts;  // host name -> HostRecord (lmdb_store_hosts.cc)
  size_t max_pending_oauth_requests = kMaxPendingOAuthRequests;

  ~LmdbStoreState();

  // Fingerprints of `user`'s keys, with their index keys, in name order.
  Result<std::vector<std::pair<std::string, std::string>>> UserKeys(lmdb::Txn& txn,
                                                                    std::string_view user);
  Status InsertKey(lmdb::Txn& txn, const SshKey& key);
  // Removes every token label of `user` (DeleteUser).
  Status DeleteUserTokenLabels(lmdb::Txn& txn, std::string_view user);
  // Removes every integration of `user` (DeleteUser).
  Status DeleteUserIntegrations(lmdb::Txn& txn, std::string_view user);
  // Drops "vm:ID" of `vm` from every integration of its owner (DeleteVm).
  Status DropVmAttachments(lmdb::Txn& txn, const VmRecord& vm);
  // Removes the VM's share settings and its links' index entries (DeleteVm).
  Status DeleteVmShare(lmdb::Txn& txn, std::string_view vm_id);
  // Removes the user's sign-in records and drops them from every VM's share users
  // (DeleteUser).
  Status DeleteUserWeb(lmdb::Txn& txn, std::string_view user);
  // Accrues `vm`'s usage from its meter's marks up to `at_ms` into its owner's rows (folding
  // past the per-day cap) and prunes that owner's rows older than the retention; the caller
  // moves the marks (MeterVm, DeleteVm).
  Status AccrueUsage(lmdb::Txn& txn, const VmRecord& vm, int64_t at_ms);
  // The key `fingerprint` if it belongs to `user`, else NotFound.
  Result<SshKey> OwnedKey(lmdb::Txn& txn, std::string_view user, std::string_view fingerprint);
};

}  // namespace warren
