// Store: warren's durable records — users and their SSH keys and API token labels, VMs and
// the jobs running in them, integrations, the web's share settings and browser sign-ins
// (keys/web_share.h); usage in later issues. LmdbStore
// (lmdb_store.h) is the implementation; tests use it on a temp dir rather than a fake.
// Implementations are thread-safe: any thread may call any method; each method is one transaction,
// so a multi-record change is all or nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keys/scope.h"
#include "keys/usage.h"
#include "keys/web_share.h"
#include "lobby/base/status.h"

namespace warren {

// What a user's VMs may hold at most (lobby/commands/vm_quota.h applies them: the VM count
// and disk of every VM they own, the vCPUs and memory of those meant to run). Each limit:
// nullopt = the server's default (serve --user-max-*), kNoLimit = none, else the most; 0
// allows none at all.
inline constexpr int64_t kNoLimit = -1;
struct UserLimits {
  std::optional<int64_t> max_vms;
  std::optional<int64_t> max_cpus;
  std::optional<int64_t> max_memory_mib;
  std::optional<int64_t> max_disk_gib;
  std::optional<int64_t> max_sandboxes;  // sandboxes that exist at once (any state)
};

struct User {
  std::string name;  // ^[a-z][a-z0-9_-]{0,31}$
  bool admin = false;
  int64_t created_at = 0;
  UserLimits limits = {};  // the user's own; unset ones follow the server's defaults
};

struct SshKey {
  std::string fingerprint;  // "SHA256:<base64 without padding>" of the key blob; unique server-wide
  std::string user;         // owner
  // Unique per user; what `ssh-key remove/rename` accept besides the fp.
  // ^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$ (no ':', so never mistaken for a fingerprint).
  std::string name;
  std::string algorithm;    // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string blob_base64;  // the public key blob as in authorized_keys
  std::string comment;
  int64_t added_at = 0;
  int64_t last_used_at = 0;  // 0 = never
  Scope scope;               // restrictions; Unrestricted() for a plain key
};

// One API token minted under a label: its limits (the token carries them too, signed) and
// when. Kept so `ssh-key list` can show them and so a restricted caller can be refused
// removing a label whose tokens are wider than itself.
struct IssuedToken {
  Scope scope;
  int64_t issued_at = 0;
};

// The label API tokens are minted under (`ssh-key generate-api-key --label NAME`). Tokens
// carry the label's random id, never its name, and are valid only while a label with that
// id exists and belongs to their user: removing the label revokes every token of it, and a
// later label of the same name has a new id, so it does not revive them.
struct TokenLabel {
  std::string id;    // 32 lowercase hex digits (128 random bits); unique server-wide
  std::string user;  // owner
  // Same rules as SshKey::name, and unique per user among key names and label names, so
  // `ssh-key remove NAME` names exactly one thing.
  std::string name;
  int64_t created_at = 0;
  int64_t last_used_at = 0;         // 0 = never; updated at most once a minute
  std::vector<IssuedToken> tokens;  // oldest first, at most kMaxTokensPerLabel
};

inline constexpr size_t kMaxTokensPerLabel = 100;

// What the user asked a VM to be; reconcile brings the hypervisor back to it after a
// restart of warren or the host.
enum class DesiredState { kRunning, kStopped, kPaused };
std::string_view DesiredStateName(DesiredState s);  // "running", "stopped", "paused"

// How far a VM's creation (or removal) got. A record is written (kCreating) before the
// hypervisor is asked for anything, so a crash half-way leaves a record that reconcile can
// clean up rather than a domain nobody knows about; `rm` marks it kRemoving before it
// destroys the domain, so a crash before the record is deleted leaves one that reconcile
// finishes removing rather than a record whose domain is gone.
enum class VmPhase { kCreating, kReady, kRemoving };
std::string_view VmPhaseName(VmPhase p);  // "creating", "ready", "removing"

// A resize asked of the hypervisor and not yet recorded: `resize` writes it before it asks the
// host and replaces it with the new sizes once the host agreed, so after a crash in between
// reconcile asks the host again and records them. 0 leaves a value as it is.
struct PendingResize {
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
};

struct VmRecord {
  std::string id;     // [a-z0-9]{12}, random, never reused: the domain is "warren-<id>"
  std::string name;   // unique server-wide; see CheckVmName (vm_rules.h)
  std::string owner;  // user name
  std::string image;  // "NAME@VERSION"
  int cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  std::vector<std::string> tags;  // sorted, no duplicates
  std::string comment;
  std::vector<std::pair<std::string, std::string>> env;
  // What the guest may reach: "all" (a network device; the host's isolation rules apply),
  // "integrations" or "none" (no network device). Stores before schema 5 said "full" for all.
  std::string egress = "all";
  int64_t created_at = 0;
  DesiredState desired_state = DesiredState::kRunning;
  VmPhase phase = VmPhase::kCreating;
  // "vm", or "sandbox": a VM with a size from the server's table, reserved capacity and a
  // lifetime (lobby/commands/sandbox.h).
  std::string kind = "vm";
  std::string size;        // a sandbox's size name ("small"); "" for a VM
  int64_t expires_at = 0;  // Unix seconds a sandbox is destroyed at; 0 for a VM
  // Set only while a resize is between the host and the store (see PendingResize).
  std::optional<PendingResize> pending_resize;
  // Set only while `restart` runs: the guest, told to shut down, powers off by itself even
  // should warren die before it starts the VM again; reconcile restarts a VM that has it.
  bool restarting = false;
  // How it was made and how long that took, for operators and benchmarks (stat --json):
  // kVmMadeHow below; made_ms from the request to the guest answering.
  std::string made = "boot";
  int64_t made_ms = 0;
  // The VM host holding it (serve --host NAME=URI, lobby/base/host_name.h); "" in records
  // from before warren drove several hosts: the default (first) host.
  std::string host;
  // Where its usage accrual stands (keys/usage.h). CreateVm stores it as given (its
  // disk_since_ms is the creation); afterwards only MeterVm and DeleteVm move it: UpdateVm
  // keeps the stored meter whatever `change` does to it.
  VmMeter meter;
};

// The sizes a resize leaves in `vm` once the host made them (a disk only grows), with no
// resize pending any more.
inline void ApplyResize(VmRecord& vm, const PendingResize& resize) {
  if (resize.cpus != 0) vm.cpus = resize.cpus;
  if (resize.memory_mib != 0) vm.memory_mib = resize.memory_mib;
  if (resize.disk_gib > vm.disk_gib) vm.disk_gib = resize.disk_gib;
  vm.pending_resize.reset();
}

// What VmRecord::made may say: booted from its image, restored from a saved template under its
// own identity, taken from the warm pool (a paused VM restored from a template beforehand),
// copied from another VM's disk (cp), or copied with its memory (cp --live).
inline constexpr const char* kVmMadeHow[] = {"boot", "template", "pool", "copy", "live-copy"};

// A command in a VM that outlived the call that started it (`ssh VM CMD` past its
// wait). The guest's runner holds the process and its output; this record holds who may
// see it and how far `wait` has read.
struct JobRecord {
  std::string job;    // the runner's id, [0-9a-f]{8}; unique within its VM
  std::string vm_id;  // shown to users as "<current VM name>/<job>"
  std::string owner;
  std::string command;  // as started, cut to kMaxJobCommandBytes
  int64_t started_at = 0;
  // Where the next `wait` resumes reading.
  uint64_t stdout_offset = 0;
  uint64_t stderr_offset = 0;
  bool finished = false;
  std::optional<int> exit_code;  // when finished: nullopt when it ended without one
  int signal = 0;                // when finished by a signal
  int64_t ended_at = 0;          // when warren learned it finished
};

inline constexpr size_t kMaxJobCommandBytes = 1024;

// An integration (keys/integration.h has its rules): a host-side HTTP reverse proxy to
// `target` that adds secret headers on the way, so the secret never enters a VM; VMs it is
// attached to reach it as http(s)://NAME.int.DOMAIN/. Its secrets are sealed with the
// integration key (keys/secret_box.h): the record never holds one in plaintext, only which
// headers are added and a fingerprint.
struct IntegrationRecord {
  std::string id;     // 32 lowercase hex digits, random; unique server-wide; seals are bound to it
  std::string owner;  // user name: integration names are per owner, and so is what VMs reach
  std::string name;   // CheckIntegrationName: a DNS label; unique per owner
  std::string kind = "http-proxy";
  std::string target;                     // a normalised TargetUrl: scheme://host[:port][/prefix]
  std::vector<std::string> header_names;  // the headers it adds, in order; values are sealed
  bool bearer = false;                    // it adds "Authorization: Bearer …" (sealed)
  std::string sealed;                     // SecretKey::Seal of the values and the bearer
  std::string fingerprint;                // 12 hex digits: tells versions of the secrets apart
  // Which of the owner's VMs may use it: "vm:ID" (by id, so a rename keeps it), "tag:T"
  // (every VM carrying T at the time of the request), "all". Sorted, no duplicates.
  std::vector<std::string> attachments;
  int64_t created_at = 0;
};

// What the lobby decided about one VM host (serve --host NAME=URI); a host with no record
// is one nothing was decided about. Hosts themselves come from serve's flags, not from here.
struct HostRecord {
  std::string name;  // lobby/base/host_name.h
  // Drained (`hosts drain`): no new VM is placed there; what it holds stays and runs.
  bool drained = false;
  int64_t drained_at = 0;  // Unix seconds; 0 when not drained
  std::string drained_by;  // the admin who drained it
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates a user with its first keys in one transaction.
  // Conflict if the user exists or any key's fingerprint is registered to anyone.
  virtual Status CreateUser(const User& user, const std::vector<SshKey>& keys) = 0;
  virtual Result<User> GetUser(std::string_view name) = 0;  // NotFound
  virtual Result<std::vector<User>> ListUsers() = 0;        // sorted by name
  // Read-modify-write of one user in one transaction (as UpdateVm): `change` may not change
  // the name (InvalidArgument); a limit below kNoLimit is InvalidArgument. NotFound.
  virtual Status UpdateUser(std::string_view name, const std::function<Status(User&)>& change) = 0;
  // Removes the user and all of its keys, token labels, integrations and browser sign-ins
  // (magic links, sessions, tickets), and drops it from every VM shared with it. NotFound if
  // absent.
  virtual Status DeleteUser(std::string_view name) = 0;

  // Conflict if the fingerprint is registered (to anyone) or the name is taken for this
  // user; NotFound if the user does not exist.
  virtual Status AddKey(const SshKey& key) = 0;
  virtual Result<SshKey> GetKey(std::string_view fingerprint) = 0;          // NotFound
  virtual Result<std::vector<SshKey>> ListKeys(std::string_view user) = 0;  // sorted by added_at
  // NotFound unless the key exists and belongs to `user`.
  virtual Status RemoveKey(std::string_view user, std::string_view fingerprint) = 0;
  // Conflict if `new_name` is taken for this user.
  virtual Status RenameKey(std::string_view user, std::string_view fingerprint,
                           std::string_view new_name) = 0;
  // Records a successful login; a missing key is not an error (it may have just been removed).
  virtual Status TouchKey(std::string_view fingerprint, int64_t when_unix) = 0;

  // ---- API token labels. Names share the per-user namespace of key names: AddKey,
  // RenameKey and these refuse a name the other kind holds (Conflict).
  // Records `token` under `user`'s label `name`: appended to the label when it exists,
  // else a new label with id `new_id` and created_at `now`. Returns the label as stored.
  // NotFound for an unknown user; Conflict when a key has that name; LimitExceeded past
  // kMaxTokensPerLabel; InvalidArgument for a malformed name or id.
  virtual Result<TokenLabel> RecordToken(std::string_view user, std::string_view name,
                                         std::string_view new_id, const IssuedToken& token,
                                         int64_t now) = 0;
  virtual Result<TokenLabel> GetTokenLabel(std::string_view id) = 0;  // NotFound
  // NotFound when the user does not exist; sorted by name.
  virtual Result<std::vector<TokenLabel>> ListTokenLabels(std::string_view user) = 0;
  // Revokes every token of the label. NotFound unless it exists and belongs to `user`.
  virtual Status RemoveTokenLabel(std::string_view user, std::string_view id) = 0;
  // Conflict if `new_name` is taken (by a key or a label) for this user.
  virtual Status RenameTokenLabel(std::string_view user, std::string_view id,
                                  std::string_view new_name) = 0;
  // As TouchKey; a missing label is not an error.
  virtual Status TouchTokenLabel(std::string_view id, int64_t when_unix) = 0;

  // ---- VMs. Names are unique server-wide (an index maps name -> id).
  // Conflict if the id or the name is taken; NotFound if the owner does not exist;
  // InvalidArgument for a malformed id, name or tag.
  virtual Status CreateVm(const VmRecord& vm) = 0;
  virtual Result<VmRecord> GetVm(std::string_view id) = 0;          // NotFound
  virtual Result<VmRecord> GetVmByName(std::string_view name) = 0;  // NotFound
  virtual Result<std::vector<VmRecord>> ListVms() = 0;              // sorted by name
  // Read-modify-write of one record in one transaction, so concurrent commands (a tag and
  // a comment at once) never lose each other's change. `change` runs inside the write
  // transaction: it must not call the store, and may not change id, name or owner
  // (InvalidArgument). A non-OK status from `change` abandons the update and is returned.
  virtual Status UpdateVm(std::string_view id, const std::function<Status(VmRecord&)>& change) = 0;
  // Conflict if `new_name` is taken; NotFound for an unknown id.
  virtual Status RenameVm(std::string_view id, std::string_view new_name) = 0;
  // Removes the VM, its name, all of its jobs and its share settings and links, and drops its
  // "vm:ID" attachment from every integration; first, in the same transaction, accrues its
  // usage up to `at_ms` (as MeterVm with running = false), so its rows outlive it. NotFound
  // for an unknown id.
  virtual Status DeleteVm(std::string_view id, int64_t at_ms) = 0;

  // ---- Usage (keys/usage.h), per owner, UTC day and VM.
  // One transaction: accrues the VM's usage from its meter's marks up to `at_ms` into its
  // owner's day rows (named, kinded and sized as the record is now), then marks it running
  // (with the record's vCPUs and memory) or not (MarkedAt), and prunes that owner's rows
  // older than the retention. Called on every state transition the hypervisor reports and by
  // reconcile. NotFound for an unknown VM.
  virtual Status MeterVm(std::string_view id, bool running, int64_t at_ms) = 0;
  // Rows of `owner` (every owner when empty) from UTC day `since_day` on, sorted by owner,
  // day and VM id. What accrues since each live VM's marks is not in them: add AccrueTo of
  // its record's meter.
  virtual Result<std::vector<UsageRow>> ListUsage(std::string_view owner, int64_t since_day) = 0;

  // ---- VM hosts: what the lobby decided about each (HostRecord), by name.
  virtual Result<std::vector<HostRecord>> ListHosts() = 0;  // sorted by name
  // Inserts or replaces; InvalidArgument for a bad name.
  virtual Status PutHost(const HostRecord& host) = 0;

  // ---- Jobs, keyed by (vm_id, job).
  // Inserts or replaces. NotFound if the VM does not exist.
  virtual Status PutJob(const JobRecord& job) = 0;
  virtual Result<JobRecord> GetJob(std::string_view vm_id, std::string_view job) = 0;
  // One VM's jobs, or every job when vm_id is empty; oldest first.
  virtual Result<std::vector<JobRecord>> ListJobs(std::string_view vm_id) = 0;
  // As UpdateVm: `change` may not change job or vm_id.
  virtual Status UpdateJob(std::string_view vm_id, std::string_view job,
                           const std::function<Status(JobRecord&)>& change) = 0;
  virtual Status DeleteJob(std::string_view vm_id, std::string_view job) = 0;  // NotFound

  // ---- Integrations, keyed by (owner, name). The store checks every record it writes
  // (ValidateIntegrationRecord, keys/integration.h) and that every "vm:ID" attachment names
  // a VM of the owner, in the same transaction: no attachment outlives its VM.
  // Conflict if the id is taken or the owner has an integration of that name; NotFound for
  // an unknown owner or an attached VM that is not the owner's; InvalidArgument for a
  // malformed record.
  virtual Status CreateIntegration(const IntegrationRecord& integration) = 0;
  virtual Result<IntegrationRecord> GetIntegration(std::string_view owner,
                                                   std::string_view name) = 0;  // NotFound
  // The owner's integrations by name; empty for an owner with none (or no such owner).
  virtual Result<std::vector<IntegrationRecord>> ListIntegrations(std::string_view owner) = 0;
  // Read-modify-write in one transaction (as UpdateVm): `change` may not change id, owner or
  // name (InvalidArgument); the result is checked as CreateIntegration checks a new one.
  virtual Status UpdateIntegration(std::string_view owner, std::string_view name,
                                   const std::function<Status(IntegrationRecord&)>& change) = 0;
  // Conflict if the owner has an integration named `new_name`; NotFound.
  virtual Status RenameIntegration(std::string_view owner, std::string_view name,
                                   std::string_view new_name) = 0;
  virtual Status DeleteIntegration(std::string_view owner, std::string_view name) = 0;  // NotFound

  // ---- The web (keys/web_share.h). Only hashes of secrets are passed in or kept.
  // A VM's share settings: the defaults when it has none stored. NotFound for an unknown VM.
  virtual Result<VmShare> GetVmShare(std::string_view vm_id) = 0;
  // Read-modify-write in one transaction (as UpdateVm): `change` may not change vm_id; the
  // result is checked (ValidateVmShare), every user in it must exist (NotFound), and the
  // index of link hashes follows the links added and removed. NotFound for an unknown VM.
  virtual Status UpdateVmShare(std::string_view vm_id,
                               const std::function<Status(VmShare&)>& change) = 0;
  // The live share link whose token hashes to `token_sha256`; NotFound.
  virtual Result<ShareLinkMatch> FindShareLink(std::string_view token_sha256) = 0;
  // Adds `uses` to the link's use count and sets its last use (a later time only). A link
  // or VM gone meanwhile is not an error.
  virtual Status RecordShareLinkUses(std::string_view vm_id, std::string_view link_id, int64_t uses,
                                     int64_t when) = 0;

  // Stores a magic link, first pruning every expired sign-in record (links, sessions,
  // tickets). LimitExceeded when its user holds kMaxMagicLinksPerUser live ones; NotFound
  // for an unknown user; Conflict when the hash is taken.
  virtual Status CreateMagicLink(const MagicLink& link, int64_t now) = 0;
  // Single use, in one transaction: the live magic link `token_sha256` is deleted and the
  // session `make` builds from it stored (LimitExceeded past kMaxBrowserSessionsPerUser).
  // NotFound when the link is unknown, used or expired. `make` must not call the store.
  virtual Result<BrowserSession> RedeemMagicLink(
      std::string_view token_sha256, int64_t now,
      const std::function<Result<BrowserSession>(const MagicLink&)>& make) = 0;
  // The live (unexpired) session `id_sha256`; NotFound.
  virtual Result<BrowserSession> GetBrowserSession(std::string_view id_sha256, int64_t now) = 0;
  // Stores a ticket, first pruning expired sign-in records. NotFound unless its domain
  // session is live; LimitExceeded past kMaxHostTicketsPerUser.
  virtual Status CreateHostTicket(const HostTicket& ticket, int64_t now) = 0;
  // Single use, in one transaction: the ticket is deleted and, when it is live, for `host`
  // and its domain session is still live, the session `make` builds from the two is stored
  // in place of any earlier one of the same sign-in for that host. NotFound otherwise (a
  // ticket presented on the wrong host is used up all the same).
  virtual Result<BrowserSession> RedeemHostTicket(
      std::string_view token_sha256, std::string_view host, int64_t now,
      const std::function<Result<BrowserSession>(const HostTicket&, const BrowserSession&)>&
          make) = 0;
  // Ends the sign-in the session `id_sha256` belongs to: every session with its sign_in_id
  // and the tickets issued from them. Returns how many sessions ended (0 for an unknown one).
  virtual Result<size_t> EndBrowserSignIn(std::string_view id_sha256) = 0;
  // Ends every browser session, magic link and ticket of `user`; returns the sessions ended.
  virtual Result<size_t> EndUserBrowserSessions(std::string_view user) = 0;
};

}  // namespace warren
