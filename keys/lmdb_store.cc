#include "keys/lmdb_store.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "keys/lmdb_store_state.h"
#include "keys/lmdb_table.h"
#include "keys/public_key.h"
#include "lobby/base/log.h"
#include "lobby/base/user_name.h"

namespace warren {

// ---- Record codecs ----------------------------------------------------------------------
// Field names are the store's on-disk format: renaming one needs a schema upgrade step.
// Decoders ignore unknown fields, so a downgrade after an additive change still reads.

namespace lmdb {

namespace {

// A user's limits as stored: only the ones set, a number or "none". An additive field: older
// records have no "limits" (every limit the server's default) and need no upgrade step.
constexpr std::pair<const char*, std::optional<int64_t> UserLimits::*> kLimitFields[] = {
    {"max_vms", &UserLimits::max_vms},
    {"max_cpus", &UserLimits::max_cpus},
    {"max_memory_mib", &UserLimits::max_memory_mib},
    {"max_disk_gib", &UserLimits::max_disk_gib},
    {"max_sandboxes", &UserLimits::max_sandboxes},
};

}  // namespace

nlohmann::json Codec<User>::Encode(const User& u) {
  nlohmann::json j = {{"name", u.name}, {"admin", u.admin}, {"created_at", u.created_at}};
  nlohmann::json limits = nlohmann::json::object();
  for (const auto& [field, member] : kLimitFields) {
    const std::optional<int64_t>& v = u.limits.*member;
    if (v) limits[field] = *v == kNoLimit ? nlohmann::json("none") : nlohmann::json(*v);
  }
  if (!limits.empty()) j["limits"] = std::move(limits);
  return j;
}

Result<User> Codec<User>::Decode(const nlohmann::json& j) {
  try {
    User u;
    u.name = j.at("name").get<std::string>();
    u.admin = j.value("admin", false);
    u.created_at = j.value("created_at", int64_t{0});
    if (auto limits = j.find("limits"); limits != j.end()) {
      for (const auto& [field, member] : kLimitFields) {
        auto v = limits->find(field);
        if (v == limits->end()) continue;
        if (v->is_string() && v->get<std::string>() == "none") {
          u.limits.*member = kNoLimit;
        } else if (v->is_number_integer() && v->get<int64_t>() >= 0) {
          u.limits.*member = v->get<int64_t>();
        } else {
          return Internal("user " + u.name + ": limit " + field + " is " + v->dump());
        }
      }
    }
    return u;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

nlohmann::json Codec<SshKey>::Encode(const SshKey& k) {
  return {{"fingerprint", k.fingerprint},
          {"user", k.user},
          {"name", k.name},
          {"algorithm", k.algorithm},
          {"blob", k.blob_base64},
          {"comment", k.comment},
          {"added_at", k.added_at},
          {"last_used_at", k.last_used_at},
          {"scope", k.scope.ToJson()}};
}

Result<SshKey> Codec<SshKey>::Decode(const nlohmann::json& j) {
  try {
    SshKey k;
    k.fingerprint = j.at("fingerprint").get<std::string>();
    k.user = j.at("user").get<std::string>();
    k.name = j.at("name").get<std::string>();
    k.algorithm = j.value("algorithm", "");
    k.blob_base64 = j.value("blob", "");
    k.comment = j.value("comment", "");
    k.added_at = j.value("added_at", int64_t{0});
    k.last_used_at = j.value("last_used_at", int64_t{0});
    if (auto it = j.find("scope"); it != j.end()) {
      WARREN_ASSIGN_OR_RETURN(k.scope, Scope::FromJson(*it));
    }
    return k;
  } catch (const nlohmann::json::exception& e) {
    return Internal(e.what());
  }
}

}  // namespace lmdb

namespace {

// Named databases the environment may hold: the 25 of schema 9 and room for more.
constexpr unsigned kMaxTables = 32;
constexpr const char kSchemaVersionKey[] = "schema_version";

// ---- Schema upgrades --------------------------------------------------------------------
// Each step takes the store from version to_version - 1 to to_version inside the opening
// write transaction, so an interrupted upgrade leaves the old store untouched. Add a step
// (and bump kSchemaVersion) for every change to tables or record formats; never edit a
// released step.

struct UpgradeStep {
  int to_version;
  const char* what;
  Status (*run)(lmdb::Txn& txn);
};

Status CreateInitialTables(lmdb::Txn& txn) {
  return store_internal::CreateTables(txn, {"users", "keys", "key_names"});
}

constexpr UpgradeStep kUpgrades[] = {
    {1, "create tables users, keys, key_names", &CreateInitialTables},
    {2, "create tables vms, vm_names, jobs", &store_internal::CreateVmTables},
    {3, "create tables token_labels, token_label_names", &store_internal::CreateTokenTables},
    {4, "create tables oauth_clients, oauth_requests, oauth_user_codes, oauth_codes, oauth_refresh",
     &store_internal::CreateOAuthTables},
    {5, "create tables integrations, integration_names", &store_internal::CreateIntegrationTables},
    {6, "vms: egress \"full\" is now \"all\"", &store_internal::RenameFullEgress},
    {7, "create tables vm_shares, share_links, web_magic_links, web_sessions, web_tickets",
     &store_internal::CreateWebTables},
    {8, "create table usage", &store_internal::CreateUsageTables},
    {9, "create table hosts", &store_internal::CreateHostTables},
};
static_assert(std::size(kUpgrades) > 0 &&
                  kUpgrades[std::size(kUpgrades) - 1].to_version == LmdbStore::kSchemaVersion,
              "the last upgrade step must reach kSchemaVersion");

// LMDB forbids opening one environment twice in a process: closing either copy drops the
// other's POSIX locks. Open refuses a second handle on the same directory instead.
std::mutex open_dirs_mu;
std::set<std::string>& OpenDirs() {
  static auto* dirs = new std::set<std::string>;
  return *dirs;
}

using store_internal::Shown;

using store_internal::NameIndexKey;
using store_internal::UserPrefix;

constexpr size_t kMaxKeyNameBytes = 64;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLower(c) || IsDigit(c) || (c >= 'A' && c <= 'Z'); }

using store_internal::ValidateKeyName;

Status ValidateUserLimits(const UserLimits& limits) {
  for (const auto& [field, member] : lmdb::kLimitFields) {
    const std::optional<int64_t>& v = limits.*member;
    if (v && *v < kNoLimit) {
      return InvalidArgument(std::string("user limit ") + field + " is a count, a size or none");
    }
  }
  return Status::Ok();
}

// What every stored key must satisfy.
Status ValidateKeyRecord(const SshKey& key) {
  WARREN_RETURN_IF_ERROR(ValidateKeyName(key.name));
  if (!key.fingerprint.starts_with("SHA256:") || key.fingerprint.size() > 128) {
    return InvalidArgument("key fingerprint must be \"SHA256:...\"");
  }
  // The fingerprint is the key's identity at login: one that disagrees with the blob would
  // make this key unusable and admit whoever holds the key the fingerprint really names.
  if (!key.blob_base64.empty()) {
    WARREN_ASSIGN_OR_RETURN(std::string fp, FingerprintOfBase64Blob(key.blob_base64));
    if (fp != key.fingerprint) {
      return InvalidArgument("key fingerprint " + key.fingerprint + " does not match its blob");
    }
  }
  if (!key.scope.tag.empty()) WARREN_RETURN_IF_ERROR(ValidateTag(key.scope.tag));
  return Status::Ok();
}

Status CreateDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return InvalidArgument(dir + " exists and is not a directory");
    // An existing directory is the operator's choice; say so when others can read it.
    if ((st.permissions() & (fs::perms::group_all | fs::perms::others_all)) != fs::perms::none) {
      LogWarn("store: " + dir + " is accessible to other users; chmod 700 it");
    }
    return Status::Ok();
  }
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("creating " + dir + ": " + ec.message());
  // create_directories honours the umask; the store holds every user's keys, so the data
  // directory itself is owner-only regardless.
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) return Unavailable("setting permissions of " + dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

namespace store_internal {

// The index key of a per-user name: user NUL name. Neither part can hold NUL (both
// validated).
std::string NameIndexKey(std::string_view user, std::string_view name) {
  std::string k(user);
  k.push_back('\0');
  k.append(name);
  return k;
}

std::string UserPrefix(std::string_view user) {
  std::string k(user);
  k.push_back('\0');
  return k;
}

// The store enforces the naming rules itself (the commands check them earlier, with
// friendlier messages) because the name index joins user and key name with NUL and the
// rules keep both parts free of it. User names: lobby/base/user_name.h.
// ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$
Status ValidateKeyName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxKeyNameBytes && IsAlnum(name[0]);
  for (char c : name) ok = ok && (IsAlnum(c) || c == '.' || c == '_' || c == '@' || c == '-');
  if (ok) return Status::Ok();
  return InvalidArgument(
      "key name is not valid: 1-64 of letters, digits and . _ @ -, starting with a letter or "
      "digit");
}

Status CreateTables(lmdb::Txn& txn, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    WARREN_RETURN_IF_ERROR(lmdb::JsonTable::Open(txn, name, /*create=*/true).status());
  }
  return Status::Ok();
}

std::string Shown(std::string_view id) {
  constexpr size_t kMax = 80;
  return id.size() <= kMax ? std::string(id) : std::string(id.substr(0, kMax)) + "...";
}

}  // namespace store_internal

LmdbStoreState::~LmdbStoreState() {
  // Tables hold only dbi numbers; closing the environment releases them.
  env.reset();
  if (!canonical_dir.empty()) {
    std::lock_guard lock(open_dirs_mu);
    OpenDirs().erase(canonical_dir);
  }
}

Result<std::vector<std::pair<std::string, std::string>>> LmdbStoreState::UserKeys(
    lmdb::Txn& txn, std::string_view user) {
  std::vector<std::pair<std::string, std::string>> out;
  WARREN_RETURN_IF_ERROR(key_names.Scan(txn, UserPrefix(user),
                                        [&](std::string_view k, std::string&& fp) -> Result<bool> {
                                          out.emplace_back(std::string(k), std::move(fp));
                                          return true;
                                        }));
  return out;
}

Status LmdbStoreState::InsertKey(lmdb::Txn& txn, const SshKey& key) {
  WARREN_ASSIGN_OR_RETURN(bool added, keys.Insert(txn, key.fingerprint, key));
  if (!added) return Conflict("key " + key.fingerprint + " is already registered");
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> label,
                          token_label_names.Get(txn, NameIndexKey(key.user, key.name)));
  if (label) return Conflict(key.user + " already has a token label named " + key.name);
  WARREN_ASSIGN_OR_RETURN(added,
                          key_names.Insert(txn, NameIndexKey(key.user, key.name), key.fingerprint));
  if (!added) return Conflict(key.user + " already has a key named " + key.name);
  return Status::Ok();
}

Result<SshKey> LmdbStoreState::OwnedKey(lmdb::Txn& txn, std::string_view user,
                                        std::string_view fingerprint) {
  WARREN_ASSIGN_OR_RETURN(std::optional<SshKey> key, keys.Get(txn, fingerprint));
  if (!key || key->user != user) {
    return NotFound(Shown(user) + " has no key " + Shown(fingerprint));
  }
  return std::move(*key);
}

LmdbStore::LmdbStore(std::unique_ptr<LmdbStoreState> state) : s_(std::move(state)) {}
LmdbStore::~LmdbStore() = default;

const std::string& LmdbStore::dir() const { return s_->dir; }

Result<std::unique_ptr<LmdbStore>> LmdbStore::Open(const std::string& dir) {
  return Open(dir, Options());
}

Result<std::unique_ptr<LmdbStore>> LmdbStore::Open(const std::string& dir, const Options& options) {
  if (dir.empty()) return InvalidArgument("store directory is empty");
  WARREN_RETURN_IF_ERROR(CreateDirectory(dir).Annotate("opening store"));

  auto state = std::make_unique<LmdbStoreState>();
  state->dir = dir;
  {
    std::error_code ec;
    std::string canonical = std::filesystem::canonical(dir, ec).string();
    if (ec) return Unavailable("opening store: resolving " + dir + ": " + ec.message());
    std::lock_guard lock(open_dirs_mu);
    if (!OpenDirs().insert(canonical).second) {
      return Conflict("the store in " + dir + " is already open in this process");
    }
    state->canonical_dir = canonical;  // from here on ~State releases the entry
  }

  MDB_env* raw_env = nullptr;
  int rc = mdb_env_create(&raw_env);
  if (rc != 0) return lmdb::Error(rc, "opening store: creating the environment");
  state->env.reset(raw_env);
  if ((rc = mdb_env_set_maxdbs(raw_env, kMaxTables)) != 0 ||
      (rc = mdb_env_set_mapsize(raw_env, options.map_size_bytes)) != 0) {
    return lmdb::Error(rc, "opening store: configuring the environment");
  }
  // MDB_NOTLS: read transactions are not tied to the thread that began them, so a reader
  // may hop threads (a command that awaits). No MDB_NOSYNC/MDB_NOMETASYNC: a commit is on
  // disk when it returns.
  rc = mdb_env_open(raw_env, dir.c_str(), MDB_NOTLS, 0600);
  if (rc != 0) return lmdb::Error(rc, "opening store in " + dir);
  // Reader slots left by a crashed process would pin old pages forever.
  int dead = 0;
  mdb_reader_check(raw_env, &dead);
  if (dead > 0) LogWarn("store: cleared " + std::to_string(dead) + " stale reader slot(s)");

  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(raw_env));
  WARREN_ASSIGN_OR_RETURN(state->meta, lmdb::JsonTable::Open(txn, "meta", /*create=*/true));
  WARREN_ASSIGN_OR_RETURN(std::optional<nlohmann::json> stored,
                          state->meta.Get(txn, kSchemaVersionKey));
  int version = 0;  // a new, empty store
  if (stored) {
    if (!stored->is_number_integer() || stored->get<int64_t>() < 1 ||
        stored->get<int64_t>() > 1'000'000) {
      return Internal("opening store in " + dir + ": schema_version is corrupt: " + stored->dump());
    }
    version = stored->get<int>();
  }
  if (version > kSchemaVersion) {
    return Conflict("the store in " + dir + " has schema version " + std::to_string(version) +
                    " but this warren knows only up to " + std::to_string(kSchemaVersion) +
                    "; run a newer warren (the store was not changed)");
  }
  for (const UpgradeStep& step : kUpgrades) {
    if (step.to_version <= version) continue;
    LogInfo("store: upgrading " + dir + " to schema version " + std::to_string(step.to_version) +
            ": " + step.what);
    WARREN_RETURN_IF_ERROR(step.run(txn).Annotate("upgrading store to schema version " +
                                                  std::to_string(step.to_version)));
  }
  if (version != kSchemaVersion) {
    WARREN_RETURN_IF_ERROR(state->meta.Put(txn, kSchemaVersionKey, kSchemaVersion));
  }
  WARREN_ASSIGN_OR_RETURN(state->users, lmdb::Table<User>::Open(txn, "users", false));
  WARREN_ASSIGN_OR_RETURN(state->keys, lmdb::Table<SshKey>::Open(txn, "keys", false));
  WARREN_ASSIGN_OR_RETURN(state->key_names,
                          lmdb::Table<std::string>::Open(txn, "key_names", false));
  WARREN_ASSIGN_OR_RETURN(state->vms, lmdb::Table<VmRecord>::Open(txn, "vms", false));
  WARREN_ASSIGN_OR_RETURN(state->vm_names, lmdb::Table<std::string>::Open(txn, "vm_names", false));
  WARREN_ASSIGN_OR_RETURN(state->jobs, lmdb::Table<JobRecord>::Open(txn, "jobs", false));
  WARREN_ASSIGN_OR_RETURN(state->token_labels,
                          lmdb::Table<TokenLabel>::Open(txn, "token_labels", false));
  WARREN_ASSIGN_OR_RETURN(state->token_label_names,
                          lmdb::Table<std::string>::Open(txn, "token_label_names", false));
  WARREN_RETURN_IF_ERROR(store_internal::OpenOAuthTables(*state, txn));
  WARREN_RETURN_IF_ERROR(store_internal::OpenIntegrationTables(*state, txn));
  WARREN_RETURN_IF_ERROR(store_internal::OpenWebTables(*state, txn));
  WARREN_RETURN_IF_ERROR(store_internal::OpenUsageTables(*state, txn));
  WARREN_RETURN_IF_ERROR(store_internal::OpenHostTables(*state, txn));
  state->max_usage_rows_per_user_day = options.max_usage_rows_per_user_day;
  state->max_pending_oauth_requests = options.max_pending_oauth_requests;
  // Table handles opened in this transaction become usable by others once it commits.
  WARREN_RETURN_IF_ERROR(txn.Commit().Annotate("opening store in " + dir));
  return std::unique_ptr<LmdbStore>(new LmdbStore(std::move(state)));
}

Status LmdbStore::CreateUser(const User& user, const std::vector<SshKey>& keys) {
  WARREN_RETURN_IF_ERROR(CheckUserName(user.name));
  WARREN_RETURN_IF_ERROR(ValidateUserLimits(user.limits));
  std::vector<SshKey> records;
  records.reserve(keys.size());
  for (const SshKey& k : keys) {
    SshKey r = k;
    if (r.user.empty()) r.user = user.name;
    if (r.user != user.name) {
      return InvalidArgument("key " + r.fingerprint + " is for user " + r.user + ", not " +
                             user.name);
    }
    WARREN_RETURN_IF_ERROR(ValidateKeyRecord(r));
    records.push_back(std::move(r));
  }

  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(bool added, s_->users.Insert(txn, user.name, user));
  if (!added) return Conflict("user " + user.name + " already exists");
  // A duplicate within `keys` conflicts with its own earlier insert, and the transaction
  // is then abandoned: nothing of the user is written.
  for (const SshKey& r : records) WARREN_RETURN_IF_ERROR(s_->InsertKey(txn, r));
  return txn.Commit();
}

Result<User> LmdbStore::GetUser(std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> user, s_->users.Get(txn, name));
  if (!user) return NotFound("no user named " + Shown(name));
  return std::move(*user);
}

Result<std::vector<User>> LmdbStore::ListUsers() {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  std::vector<User> users;
  // LMDB orders keys bytewise, which for valid user names is name order.
  WARREN_RETURN_IF_ERROR(s_->users.Scan(txn, "", [&](std::string_view, User&& u) -> Result<bool> {
    users.push_back(std::move(u));
    return true;
  }));
  return users;
}

Status LmdbStore::UpdateUser(std::string_view name, const std::function<Status(User&)>& change) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> user, s_->users.Get(txn, name));
  if (!user) return NotFound("no user named " + Shown(name));
  User updated = *user;
  WARREN_RETURN_IF_ERROR(change(updated));
  if (updated.name != user->name) return InvalidArgument("UpdateUser may not change a user's name");
  WARREN_RETURN_IF_ERROR(ValidateUserLimits(updated.limits));
  WARREN_RETURN_IF_ERROR(s_->users.Put(txn, updated.name, updated));
  return txn.Commit();
}

Status LmdbStore::DeleteUser(std::string_view name) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(bool deleted, s_->users.Delete(txn, name));
  if (!deleted) return NotFound("no user named " + Shown(name));
  if (CheckUserName(name).ok()) {  // an invalid name cannot have index entries
    WARREN_ASSIGN_OR_RETURN(auto entries, s_->UserKeys(txn, name));
    for (const auto& [index_key, fp] : entries) {
      WARREN_RETURN_IF_ERROR(s_->keys.Delete(txn, fp).status());
      WARREN_RETURN_IF_ERROR(s_->key_names.Delete(txn, index_key).status());
    }
    WARREN_RETURN_IF_ERROR(s_->DeleteUserTokenLabels(txn, name));
    WARREN_RETURN_IF_ERROR(s_->DeleteUserIntegrations(txn, name));
    WARREN_RETURN_IF_ERROR(s_->DeleteUserWeb(txn, name));
  }
  return txn.Commit();
}

Status LmdbStore::AddKey(const SshKey& key) {
  if (!CheckUserName(key.user).ok()) return NotFound("no user named " + Shown(key.user));
  WARREN_RETURN_IF_ERROR(ValidateKeyRecord(key));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> user, s_->users.Get(txn, key.user));
  if (!user) return NotFound("no user named " + Shown(key.user));
  WARREN_RETURN_IF_ERROR(s_->InsertKey(txn, key));
  return txn.Commit();
}

Result<SshKey> LmdbStore::GetKey(std::string_view fingerprint) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<SshKey> key, s_->keys.Get(txn, fingerprint));
  if (!key) return NotFound("no key " + Shown(fingerprint));
  return std::move(*key);
}

Result<std::vector<SshKey>> LmdbStore::ListKeys(std::string_view user) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginRead(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<User> u, s_->users.Get(txn, user));
  if (!u) return NotFound("no user named " + Shown(user));
  WARREN_ASSIGN_OR_RETURN(auto entries, s_->UserKeys(txn, user));
  std::vector<SshKey> out;
  out.reserve(entries.size());
  for (const auto& [index_key, fp] : entries) {
    WARREN_ASSIGN_OR_RETURN(std::optional<SshKey> key, s_->keys.Get(txn, fp));
    if (!key) {
      return Internal("store index key_names/" + lmdb::PrintableKey(index_key) +
                      " points at missing key " + fp);
    }
    out.push_back(std::move(*key));
  }
  // The index yields name order; stable sort keeps it among keys added in the same second.
  std::stable_sort(out.begin(), out.end(),
                   [](const SshKey& a, const SshKey& b) { return a.added_at < b.added_at; });
  return out;
}

Status LmdbStore::RemoveKey(std::string_view user, std::string_view fingerprint) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(SshKey key, s_->OwnedKey(txn, user, fingerprint));
  WARREN_RETURN_IF_ERROR(s_->keys.Delete(txn, key.fingerprint).status());
  WARREN_RETURN_IF_ERROR(s_->key_names.Delete(txn, NameIndexKey(key.user, key.name)).status());
  return txn.Commit();
}

Status LmdbStore::RenameKey(std::string_view user, std::string_view fingerprint,
                            std::string_view new_name) {
  WARREN_RETURN_IF_ERROR(ValidateKeyName(new_name));
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(SshKey key, s_->OwnedKey(txn, user, fingerprint));
  if (key.name == new_name) return Status::Ok();
  WARREN_ASSIGN_OR_RETURN(std::optional<std::string> label,
                          s_->token_label_names.Get(txn, NameIndexKey(key.user, new_name)));
  if (label) {
    return Conflict(key.user + " already has a token label named " + std::string(new_name));
  }
  WARREN_ASSIGN_OR_RETURN(
      bool added, s_->key_names.Insert(txn, NameIndexKey(key.user, new_name), key.fingerprint));
  if (!added) return Conflict(key.user + " already has a key named " + std::string(new_name));
  WARREN_RETURN_IF_ERROR(s_->key_names.Delete(txn, NameIndexKey(key.user, key.name)).status());
  key.name = std::string(new_name);
  WARREN_RETURN_IF_ERROR(s_->keys.Put(txn, key.fingerprint, key));
  return txn.Commit();
}

Status LmdbStore::TouchKey(std::string_view fingerprint, int64_t when_unix) {
  WARREN_ASSIGN_OR_RETURN(lmdb::Txn txn, lmdb::Txn::BeginWrite(s_->env.get()));
  WARREN_ASSIGN_OR_RETURN(std::optional<SshKey> key, s_->keys.Get(txn, fingerprint));
  // Concurrent logins may land out of order; keep the latest time.
  if (!key || key->last_used_at >= when_unix) return Status::Ok();
  key->last_used_at = when_unix;
  WARREN_RETURN_IF_ERROR(s_->keys.Put(txn, key->fingerprint, *key));
  return txn.Commit();
}

}  // namespace warren
