// LmdbStore: the Store on LMDB — one environment in the data directory, a named database
// per record kind, JSON values, every method one transaction (so multi-record changes are
// all or nothing), durable commits (sync on). Thread-safe: readers run concurrently with
// each other and with the one writer LMDB admits at a time.
//
// Layout (schema version 9):
//   meta       "schema_version" -> 9
//   users      name -> User JSON (its "limits" object came later; absent: server defaults)
//   keys       fingerprint -> SshKey JSON
//   key_names  user NUL name -> fingerprint   (index: per-user name uniqueness, ListKeys)
//   vms        id -> VmRecord JSON                              (since version 2;
//              egress "full" renamed "all" in version 5; kind, size, expires_at and
//              meter added in version 8, absent: a VM with no marks)
//   vm_names   name -> id      (index: server-wide name uniqueness, lookup by name)
//   jobs       vm_id NUL job -> JobRecord JSON   (a VM's jobs are one prefix scan)
//   token_labels       id -> TokenLabel JSON                    (since version 3)
//   token_label_names  user NUL name -> id  (index: per-user names, listing a user's labels)
//   oauth_clients     client id -> OAuthClient JSON                (since version 4)
//   oauth_requests    request id (hash of the page's secret) -> OAuthRequest JSON
//   oauth_user_codes  user code hash -> request id
//   oauth_codes       authorization code hash -> request id
//   oauth_refresh     refresh token hash -> OAuthRefresh JSON
//   integrations       id -> IntegrationRecord JSON (secrets sealed)  (since version 5)
//   integration_names  owner NUL name -> id  (index: per-owner names, listing an owner's)
//   vm_shares        vm id -> VmShare JSON (public, port, users, links)  (since version 7)
//   share_links      share-link token hash -> vm id NUL link id
//   web_magic_links  magic-link token hash -> MagicLink JSON
//   web_sessions     session id hash -> BrowserSession JSON
//   web_tickets      host ticket hash -> HostTicket JSON
//   usage   owner NUL day NUL vm id -> UsageRow JSON  (since version 8; day is 12 zero-padded
//           decimal digits, so one owner's rows are one prefix in day order)
//   hosts   host name -> HostRecord JSON  (since version 9; VM records name their host since
//           then too, absent: the default host)
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "keys/oauth.h"
#include "keys/store.h"

namespace warren {

struct LmdbStoreState;

class LmdbStore final : public Store, public OAuthStore {
 public:
  // The newest schema this binary reads and writes. Opening an older store upgrades it in
  // one transaction; a newer one is refused.
  static constexpr int kSchemaVersion = 9;

  struct Options {
    // Upper bound of the database file; LMDB reserves address space, not disk. Writes past
    // it fail with LimitExceeded.
    size_t map_size_bytes = size_t{1} << 30;
    // Usage rows one owner's VMs may make in one UTC day before the rest fold into the
    // "(other VMs)" row (keys/usage.h); smaller in tests.
    size_t max_usage_rows_per_user_day = kMaxUsageRowsPerUserDay;
    // Live OAuth sign-in requests before a new one evicts (keys/oauth.h); smaller in tests.
    size_t max_pending_oauth_requests = kMaxPendingOAuthRequests;
  };

  // Opens the store in `dir`, creating the directory (mode 0700) and the store when
  // missing. A directory may be open only once per process (LMDB's rule); a second Open of
  // the same directory is Conflict. A store written by a newer warren is Conflict.
  static Result<std::unique_ptr<LmdbStore>> Open(const std::string& dir);
  static Result<std::unique_ptr<LmdbStore>> Open(const std::string& dir, const Options& options);

  ~LmdbStore() override;
  LmdbStore(const LmdbStore&) = delete;
  LmdbStore& operator=(const LmdbStore&) = delete;

  Status CreateUser(const User& user, const std::vector<SshKey>& keys) override;
  Result<User> GetUser(std::string_view name) override;
  Result<std::vector<User>> ListUsers() override;
  Status UpdateUser(std::string_view name, const std::function<Status(User&)>& change) override;
  Status DeleteUser(std::string_view name) override;

  Status AddKey(const SshKey& key) override;
  Result<SshKey> GetKey(std::string_view fingerprint) override;
  // NotFound when the user does not exist.
  Result<std::vector<SshKey>> ListKeys(std::string_view user) override;
  Status RemoveKey(std::string_view user, std::string_view fingerprint) override;
  Status RenameKey(std::string_view user, std::string_view fingerprint,
                   std::string_view new_name) override;
  Status TouchKey(std::string_view fingerprint, int64_t when_unix) override;

  Result<TokenLabel> RecordToken(std::string_view user, std::string_view name,
                                 std::string_view new_id, const IssuedToken& token,
                                 int64_t now) override;
  Result<TokenLabel> GetTokenLabel(std::string_view id) override;
  Result<std::vector<TokenLabel>> ListTokenLabels(std::string_view user) override;
  Status RemoveTokenLabel(std::string_view user, std::string_view id) override;
  Status RenameTokenLabel(std::string_view user, std::string_view id,
                          std::string_view new_name) override;
  Status TouchTokenLabel(std::string_view id, int64_t when_unix) override;

  Status CreateVm(const VmRecord& vm) override;
  Result<VmRecord> GetVm(std::string_view id) override;
  Result<VmRecord> GetVmByName(std::string_view name) override;
  Result<std::vector<VmRecord>> ListVms() override;
  Status UpdateVm(std::string_view id, const std::function<Status(VmRecord&)>& change) override;
  Status RenameVm(std::string_view id, std::string_view new_name) override;
  Status DeleteVm(std::string_view id, int64_t at_ms) override;

  Status MeterVm(std::string_view id, bool running, int64_t at_ms) override;
  Result<std::vector<UsageRow>> ListUsage(std::string_view owner, int64_t since_day) override;
  Result<std::vector<HostRecord>> ListHosts() override;
  Status PutHost(const HostRecord& host) override;

  Status PutJob(const JobRecord& job) override;
  Result<JobRecord> GetJob(std::string_view vm_id, std::string_view job) override;
  Result<std::vector<JobRecord>> ListJobs(std::string_view vm_id) override;
  Status UpdateJob(std::string_view vm_id, std::string_view job,
                   const std::function<Status(JobRecord&)>& change) override;
  Status DeleteJob(std::string_view vm_id, std::string_view job) override;

  Status CreateOAuthClient(const OAuthClient& client) override;
  Result<OAuthClient> GetOAuthClient(std::string_view id) override;
  Result<std::vector<OAuthClient>> ListOAuthClients() override;
  Status MarkOAuthClientUsed(std::string_view id, int64_t now) override;
  Result<OAuthClientRemoval> RemoveOAuthClient(std::string_view id) override;
  Status CreateOAuthRequest(const OAuthRequest& request, int64_t now) override;
  Result<OAuthRequest> GetOAuthRequest(std::string_view id) override;
  Result<OAuthRequest> FindOAuthRequestByUserCode(std::string_view user_code_hash) override;
  Result<OAuthRequest> FindOAuthRequestByCode(std::string_view code_hash) override;
  Status UpdateOAuthRequest(std::string_view id,
                            const std::function<Status(OAuthRequest&)>& change) override;
  Status PutOAuthRefresh(const OAuthRefresh& refresh) override;
  Result<OAuthRefresh> RotateOAuthRefresh(std::string_view old_hash, std::string_view client_id,
                                          std::string_view new_hash, int64_t now) override;

  Status CreateIntegration(const IntegrationRecord& integration) override;
  Result<IntegrationRecord> GetIntegration(std::string_view owner, std::string_view name) override;
  Result<std::vector<IntegrationRecord>> ListIntegrations(std::string_view owner) override;
  Status UpdateIntegration(std::string_view owner, std::string_view name,
                           const std::function<Status(IntegrationRecord&)>& change) override;
  Status RenameIntegration(std::string_view owner, std::string_view name,
                           std::string_view new_name) override;
  Status DeleteIntegration(std::string_view owner, std::string_view name) override;

  Result<VmShare> GetVmShare(std::string_view vm_id) override;
  Status UpdateVmShare(std::string_view vm_id,
                       const std::function<Status(VmShare&)>& change) override;
  Result<ShareLinkMatch> FindShareLink(std::string_view token_sha256) override;
  Status RecordShareLinkUses(std::string_view vm_id, std::string_view link_id, int64_t uses,
                             int64_t when) override;
  Status CreateMagicLink(const MagicLink& link, int64_t now) override;
  Result<BrowserSession> RedeemMagicLink(
      std::string_view token_sha256, int64_t now,
      const std::function<Result<BrowserSession>(const MagicLink&)>& make) override;
  Result<BrowserSession> GetBrowserSession(std::string_view id_sha256, int64_t now) override;
  Status CreateHostTicket(const HostTicket& ticket, int64_t now) override;
  Result<BrowserSession> RedeemHostTicket(
      std::string_view token_sha256, std::string_view host, int64_t now,
      const std::function<Result<BrowserSession>(const HostTicket&, const BrowserSession&)>& make)
      override;
  Result<size_t> EndBrowserSignIn(std::string_view id_sha256) override;
  Result<size_t> EndUserBrowserSessions(std::string_view user) override;

  // The data directory, as given to Open.
  const std::string& dir() const;

  // ---- Copies for backups (lmdb_store_copy.cc; keys/backup.h) ----
  // Writes a consistent, compacted copy of this open store to `fd` (an empty file): LMDB's
  // own copy (mdb_env_copyfd2, MDB_CP_COMPACT) from one read transaction, so writers go on
  // meanwhile and the copy holds every commit made before it began and none after.
  Status CopyTo(int fd);
  // The same for the store in `dir` when this process has not opened it (`warren backup`
  // beside a running `warren serve`): opened read-only, never upgraded. NotFound when there
  // is no store there.
  static Status CopyStoreIn(const std::string& dir, int fd);
  // The schema version recorded in a store file copied as above (`file`: its data.mdb, or
  // /proc/self/fd/N), opened read-only without a lock file. Internal when it is not a
  // store of warren's.
  static Result<int> SchemaVersionOfCopy(const std::string& file);
  // Whether another process has the store in `dir` open (a running warren): LMDB keeps a
  // shared lock on its lock file while an environment is open.
  static Result<bool> OpenElsewhere(const std::string& dir);

 private:
  // The environment and table handles (lmdb_store_state.h, internal to keys/), so that
  // only keys/ sees LMDB's headers.
  explicit LmdbStore(std::unique_ptr<LmdbStoreState> state);

  std::unique_ptr<LmdbStoreState> s_;
};

}  // namespace warren
